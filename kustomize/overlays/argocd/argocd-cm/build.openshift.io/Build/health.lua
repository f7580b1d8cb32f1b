-- Health of an OpenShift Build (Argo CD ships no check for it): phases from openshift/api BuildPhase.
hs = {}
local phase = nil
local message = nil
if obj.status ~= nil then
  phase = obj.status.phase
  message = obj.status.message
end
if phase == nil or phase == "New" or phase == "Pending" or phase == "Running" then
  hs.status = "Progressing"
  hs.message = "Build is " .. (phase or "New")
elseif phase == "Complete" then
  hs.status = "Healthy"
  hs.message = "Build completed"
elseif phase == "Failed" or phase == "Error" or phase == "Cancelled" then
  hs.status = "Degraded"
  hs.message = "Build " .. phase
  if message ~= nil and message ~= "" then
    hs.message = hs.message .. ": " .. message
  end
else
  hs.status = "Unknown"
  hs.message = "Build phase " .. phase
end
return hs
