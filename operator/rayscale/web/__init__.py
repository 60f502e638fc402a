"""What the operator serves about the clusters it autoscales, over HTTP, read-only.

`api` answers JSON (the documents of rayscale.autoscaler.view), `page` renders the same as HTML
(the status page), `server` runs either on the operator's own event loop, where the autoscaler's
rounds keep what they serve. Nothing here calls the API server or Ray: every answer is built from
what the latest rounds kept in memory.
"""
