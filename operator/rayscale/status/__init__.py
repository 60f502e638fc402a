"""`rayscale status`: what the operator knows about RayClusters, beside what Kubernetes shows.

``reach`` finds the operator and asks its read-only API (directly, or through the API server's
proxy to the leader pod), ``fetch`` reads the Kubernetes API and builds the documents,
``summary`` boils Kubernetes objects down to what is shown (pure), ``render`` turns the
documents into text (pure) and ``command`` is the subcommand. See docs/status-cli.md.
"""
