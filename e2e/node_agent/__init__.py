"""A test node for the ``e2e`` tier: a kubelet stand-in for machines without a container engine.

:class:`node_agent.agent.NodeAgent` registers a Node with the API server, renews its Lease,
binds Pending pods that have no ``nodeName`` to itself (there is no kube-scheduler: building one
costs minutes of Go compilation, and a single node needs no placement decisions), and runs each
Pod bound to it as local processes. :class:`node_agent.provisioner.LocalDirProvisioner` binds
PVCs of a test StorageClass to PVs backed by directories.

How a Pod runs:

- Image: ignored. Each container runs its ``command + args`` on this machine, PATH starting with
  ``podshim/bin`` (stand-ins for images' entrypoints: ``riverlog-connect`` runs Kafka Connect
  from the repository's launcher, its wildcard REST listener narrowed to the pod IP) and then the
  agent's Python environment (so ``python``, ``riverlog-k8s-broker`` resolve to the venv); the
  agent's ``image_env`` stands in for the images' ENV (where Kafka's jars are).
- Pod IP: its own loopback address (127.77.x.y); ``POD_IP``-style env comes from the downward
  API. Processes share the host network namespace: a server binding 0.0.0.0 on a port that
  another pod also uses will conflict (no per-pod network namespace).
- Volumes: configMap, secret, downwardAPI, projected (configMap/secret/downwardAPI/
  serviceAccountToken), emptyDir, hostPath and PVC (the bound PV's hostPath/local path) become
  directories; each container runs in a private mount namespace (``unshare -m``) where those
  directories are bind-mounted on its ``mountPath``s (see ``launch.py``).
- Live updates: configMap, secret, downwardAPI and projected volumes are laid out as a kubelet
  lays them out (a timestamped data directory, ``..data`` pointing to it, ``key -> ..data/key``)
  and refreshed while the pod runs, every ``volume_refresh`` seconds (2 s by default; a kubelet
  takes up to about a minute): a changed object is swapped in atomically (a reader sees the old or
  the new version, never a mix), removed keys disappear, files are only rewritten when their
  content changed. subPath mounts keep the version they started with, as on a node. A required
  object deleted while the pod runs leaves the last content in place; a projected
  serviceAccountToken is requested once, not rotated.
- DNS: no resolver. Each pod's ``/etc/hosts`` is replaced (bind mount, same namespace) by a
  file the agent rewrites in place listing every pod on the node by name and by its
  ``<hostname>.<subdomain>.<ns>.svc[.cluster.local]`` name, and every Service by the IP of one
  ready endpoint (no ClusterIP, no load balancing).
- Status: phase, podIP, hostIP, containerStatuses (running/waiting/terminated, restartCount),
  conditions; Ready from the readiness probe (httpGet, tcpSocket, exec) or from the process
  running when there is no probe. Restarts follow restartPolicy with a doubling backoff (1 s up
  to 10 s, shorter than the kubelet's 10 s..5 min so tests finish).
- Deletion: SIGTERM to the container's process group, SIGKILL after
  terminationGracePeriodSeconds, then the Pod object is removed (grace 0), as a kubelet does.

Not emulated: images and their file systems, resource limits/cgroups, liveness and startup
probes, init and ephemeral containers, per-pod network namespaces, ClusterIP routing, kube-proxy,
CNI, node eviction, securityContext (everything runs as the agent's user), `kubectl logs/exec`.
"""
