"""The Riverlog Kubernetes operator: Cluster, Topic, User, Connect, Connector and Mirror resources
(group riverlog.dev) made real.

Builders (``builders/``) are pure functions from a spec to manifests; handlers (``handlers/``)
apply them with server-side apply and talk to the brokers with Riverlog's own admin client (and
to Kafka Connect workers through their REST API, ``connect_rest.py``).
"""

GROUP = "riverlog.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
# The field manager of every server-side apply: fields other managers own are left alone.
FIELD_MANAGER = "riverlog-operator"
