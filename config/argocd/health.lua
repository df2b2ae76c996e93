-- Argo CD health check for connector-mcp McpServiceProfile and ServiceDeployment
-- (connectors.b10x.io/v1). Argo CD passes the object as obj.
--   Suspended:   spec.suspend is true (ServiceDeployment).
--   Progressing: the operator has not yet decided on this generation, or is retrying.
--   Degraded:    refused until a human changes something (Stalled=True).
--   Healthy:     Ready=True for the current generation.
local hs = {}
if obj.spec ~= nil and obj.spec.suspend == true then
  hs.status = "Suspended"
  hs.message = "Reconciliation is suspended (spec.suspend)"
  return hs
end
local generation = 0
if obj.metadata ~= nil and obj.metadata.generation ~= nil then
  generation = obj.metadata.generation
end
local ready, stalled, reconciling = nil, nil, nil
if obj.status ~= nil and obj.status.conditions ~= nil then
  for _, c in ipairs(obj.status.conditions) do
    if c.type == "Ready" then ready = c end
    if c.type == "Stalled" then stalled = c end
    if c.type == "Reconciling" then reconciling = c end
  end
end
if ready == nil or ready.observedGeneration == nil or ready.observedGeneration ~= generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to reconcile generation " .. tostring(generation)
  return hs
end
if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = tostring(stalled.reason) .. ": " .. tostring(stalled.message)
  return hs
end
if ready.status == "True" then
  hs.status = "Healthy"
  hs.message = tostring(ready.reason) .. ": " .. tostring(ready.message)
  return hs
end
hs.status = "Progressing"
if reconciling ~= nil then
  hs.message = tostring(reconciling.reason) .. ": " .. tostring(reconciling.message)
else
  hs.message = tostring(ready.reason) .. ": " .. tostring(ready.message)
end
return hs
