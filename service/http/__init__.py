"""The HTTP edge: what stands between a request and the work it asks for.

`routes/` holds one router per resource; beside them the exception handlers (`errors`), the
API-key dependency (`auth`), the dependency aliases (`deps`), the middlewares (`request_ids`,
`request_limits`, `metrics`' status counter, over `asgi`'s base), the per-key limits
(`key_limits`), the head limit inside uvicorn's protocol (`header_limit`), and the OpenAPI
document (`openapi`, with `examples`). The app factory, `service.main`, puts them together."""
