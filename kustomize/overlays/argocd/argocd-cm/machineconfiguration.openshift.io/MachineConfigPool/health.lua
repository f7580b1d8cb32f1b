-- Health of a MachineConfigPool from ocl-reconciler's state annotation and, with
-- `rollout: machineconfig`, what its rendered config holds (ocl-reconciler.io/rollout,
-- ocl-reconciler.io/rollout-overridden-by) and the pool's own status. No string functions: Argo CD
-- runs custom checks without the string library, so values are only compared whole.
hs = {}
local annotations = {}
if obj.metadata ~= nil and obj.metadata.annotations ~= nil then
  annotations = obj.metadata.annotations
end
-- the MCO's own layering label is its switch, not our opt-in: nothing is built for the pool
-- and the machine-config operator degrades (4.16+) or builds it itself (4.14, 4.15)
local labels = {}
if obj.metadata ~= nil and obj.metadata.labels ~= nil then
  labels = obj.metadata.labels
end
if labels["machineconfiguration.openshift.io/layering-enabled"] ~= nil then
  hs.status = "Degraded"
  hs.message = annotations["ocl-reconciler.io/mco-label"]
  if hs.message == nil or hs.message == "" then
    hs.message = "carries the MCO's label machineconfiguration.openshift.io/layering-enabled, not ocl-reconciler.io/layering-enabled: move it to ours"
  end
  return hs
end
local state = annotations["ocl-reconciler.io/state"]
local message = annotations["ocl-reconciler.io/message"]
if state == nil then
  hs.status = "Healthy"
  hs.message = "No layered OS image build recorded"
  return hs
end
if state == "Pending" or state == "Building" then
  hs.status = "Progressing"
elseif state == "Succeeded" then
  hs.status = "Healthy"
elseif state == "Failed" or state == "Blocked" or state == "Interrupted" then
  hs.status = "Degraded"
else
  hs.status = "Unknown"
end
if message ~= nil and message ~= "" then
  hs.message = state .. ": " .. message
else
  hs.message = "Layered OS image build " .. state
end
local checked = annotations["ocl-reconciler.io/rollout"]
if state ~= "Succeeded" or checked == nil then
  return hs
end
-- the rollout of our MachineConfig ocl-osimageurl-<pool>
local pool = obj.metadata.name or ""
local spec = obj.spec or {}
local status = obj.status or {}
local target = (spec.configuration or {}).name
local current = (status.configuration or {}).name
local image = annotations["machineconfiguration.openshift.io/newestImageEquivalentConfig"]
local overridden = annotations["ocl-reconciler.io/rollout-overridden-by"]
local failed = nil
if status.conditions ~= nil then
  for _, condition in ipairs(status.conditions) do
    if condition.type == "RenderDegraded" and condition.status == "True" then
      failed = condition.message or "RenderDegraded"
    end
  end
end
if failed ~= nil then
  hs.status = "Degraded"
  hs.message = "Succeeded: render failed: " .. failed
elseif overridden ~= nil and overridden ~= "" then
  hs.status = "Degraded"
  hs.message = "Succeeded: overridden by MachineConfig " .. overridden .. ", which sets osImageURL and merges after ocl-osimageurl-" .. pool .. ": rename it to sort before, or remove its osImageURL"
elseif target ~= nil and image ~= nil and checked == target .. "=" .. image then
  local total = status.machineCount or 0
  local updated = status.updatedMachineCount or 0
  local degraded = status.degradedMachineCount or 0
  if current == target and updated >= total then
    hs.message = "Succeeded: rolled out to " .. total .. " node(s)"
  else
    hs.status = "Progressing"
    hs.message = "Succeeded: rolling out " .. updated .. "/" .. total .. " nodes"
    if degraded > 0 then
      hs.message = hs.message .. ", " .. degraded .. " degraded"
    end
  end
else
  hs.status = "Progressing"
  hs.message = "Succeeded: the MCO has not rendered the image into pool " .. pool .. " yet"
end
return hs
