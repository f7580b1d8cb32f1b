-- Health of a MachineConfigPool from ocl-reconciler's state annotation.
hs = {}
local annotations = {}
if obj.metadata ~= nil and obj.metadata.annotations ~= nil then
  annotations = obj.metadata.annotations
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
return hs
