"""The floor every app stands on: plain helpers that import nothing of ours.

Environment parsing, the Redis connection and its lease, how dates are written, CSV safety,
log scrubbing, host names, /proc, and the shared API plumbing (errors, parsers, pagination,
routers, permissions and roles, throttles, OpenAPI wiring). The import contract in CI
(`.importlinter`) holds that nothing here imports another app of ours.
"""
