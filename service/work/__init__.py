"""The work a request starts, once the HTTP edge has let it in: reading a score body (`ingest`),
scoring a batch (`scoring`), the jobs that score long evaluations (`jobs`), one program run for a
policy (`runs`) and puzzle sampling (`sampling`). Scoring itself goes through `service.dispatch`
(or queue mode, `service.queue`)."""
