package main

// The help of `sbx serve`, in both builds: the full sbx's command
// (serve_cmd.go) and the lean sbx's, which hands it to the full one
// (serve_lean.go), so that `sbx --help` lists the same either way.
const (
	serveName  = "serve"
	serveUsage = "run sandboxes for clients over HTTP: POST /v1/exec gives the Result of sbx exec --json"
	// serveDescription is `sbx serve --help`'s text.
	serveDescription = "One server on this host, with this binary. Each POST /v1/exec runs one payload\n" +
		"in a fresh sandbox, as sbx exec does, and answers with the same Result plus a\n" +
		"request_id; with Accept: application/x-ndjson the output streams as it comes.\n\n" +
		"Examples:\n" +
		"   sbx serve                                     127.0.0.1:8377, no token (loopback only)\n" +
		"   sbx serve --listen unix:/run/sbx/sbx.sock    a socket of mode 0660\n" +
		"   sbx serve --listen 0.0.0.0:8377 --token-file /etc/sbx/tokens --audit-log /var/log/sbx.jsonl\n" +
		"   sbx serve --pool standard=4,data=1:4         warm sandboxes: 4 of standard, 1 to 4 of data\n" +
		"   curl -s -H \"Authorization: Bearer $T\" -d '{\"code\":\"print(1)\"}' http://127.0.0.1:8377/v1/exec\n\n" +
		"--pool PROFILE=N keeps N sandboxes of PROFILE fully built ahead (confined, the\n" +
		"interpreter started, the profile's preload imported); PROFILE=N:MAX grows toward\n" +
		"MAX while requests find none ready and shrinks back when idle. Each serves one\n" +
		"request and is destroyed; a replacement is built within --max-concurrent. A\n" +
		"request that finds none ready, or that a pooled sandbox cannot serve (a lowered\n" +
		"workspace_size, output or cpus), runs cold: it never waits for the pool. Its Result\n" +
		"says \"pooled\": true; /v1/profiles shows each pool's target, idle, hits, misses.\n\n" +
		"A request: {\"code\" | \"argv\", \"profile\", \"limits\", \"env\", \"stdin\",\n" +
		"\"files\": [{\"path\", \"content_b64\"}], \"outputs\": true, \"metadata\": {...}}. Its\n" +
		"limits (\"memory\": \"256M\", \"wall_time\": \"5s\") may lower the profile's, never raise\n" +
		"them (400, naming the key). Past --max-concurrent runs and --queue waiting: 429\n" +
		"with Retry-After. SIGTERM drains: /readyz says 503, no new runs, the runs in\n" +
		"flight get --drain-timeout, the rest are killed and answered; exit 0.\n\n" +
		"The token file holds one NAME:TOKEN a line (the audit line names the token);\n" +
		"SBX_TOKEN holds one token. A TCP address that is not loopback needs a token.\n" +
		"POST /v1/jobs runs the same request in the background (202 {id}); GET\n" +
		"/v1/jobs/ID polls it, GET /v1/jobs/ID/events streams its events from the start,\n" +
		"DELETE /v1/jobs/ID cancels it. A token whose runs keep hitting memory, pids or\n" +
		"CPU limits is throttled (429) for --breaker-cooldown.\n\n" +
		"Also GET /healthz, /readyz, /metrics (Prometheus), /v1/version, /v1/profiles,\n" +
		"/v1/openapi.json (the API's OpenAPI 3 document). See README.md."
)
