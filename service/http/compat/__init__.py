"""Routes that speak other frameworks' wire formats (`/compat/...`) on Proctor's scoring path.

`keys` takes an API key out of a compat URL (`/compat/<name>/k/{KEY}/...`) before anything can
log it; each framework's router lives in a module of its own (`nemo_gym`,
`sandbox_fusion_routes`, whose wire format and mapping onto the run pool are `sandbox_fusion`).
"""
