"""The kinds of failure a model call reports, shared by chat clients, summarizers and compaction.

Telemetry carries the kind, never the text; the UI maps a kind to the step that fixes it.
"""

REFUSED = "refused"          # nothing listening / connection refused or reset before a reply
TIMEOUT = "timeout"          # no complete answer within the configured timeout
HTTP_4XX = "http_4xx"        # the server rejected the request (bad model name, auth, quota)
HTTP_5XX = "http_5xx"        # the server failed
MALFORMED = "malformed"      # a reply that is not a chat completion
UNAVAILABLE = "unavailable"  # the backend cannot run here (missing model, missing package)
CONTEXT_EXCEEDED = "context_exceeded"  # the request does not fit the model's context window
