"""The Riverlog Kubernetes operator: Cluster and Topic resources (group riverlog.dev) made real.

Builders (``builders/``) are pure functions from a spec to manifests; handlers (``handlers/``)
apply them with server-side apply and talk to the brokers with Riverlog's own admin client.
"""

GROUP = "riverlog.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
# The field manager of every server-side apply: fields other managers own are left alone.
FIELD_MANAGER = "riverlog-operator"
