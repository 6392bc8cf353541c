{{/* Names and labels shared by the chart's templates. */}}

{{- define "riverlog.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's full name: the release name alone when it already contains the chart's. */}}
{{- define "riverlog.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "riverlog.operatorName" -}}
{{- printf "%s-operator" (include "riverlog.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "riverlog.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of everything the chart installs. */}}
{{- define "riverlog.labels" -}}
helm.sh/chart: {{ include "riverlog.chart" . }}
app.kubernetes.io/name: {{ include "riverlog.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: riverlog
{{- end -}}

{{/*
The operator's pods. component=operator keeps them apart from broker pods, which the operator
labels app.kubernetes.io/name=riverlog, component=broker, instance=<Cluster name>.
*/}}
{{- define "riverlog.operatorSelectorLabels" -}}
app.kubernetes.io/name: {{ include "riverlog.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end -}}

{{/*
The same labels as k=v,k=v (sorted by key): RIVERLOG_OPERATOR_POD_SELECTOR, the operator's pods
as the NetworkPolicy guarding each Connect's and Mirror's REST API lets them in.
*/}}
{{- define "riverlog.operatorPodSelector" -}}
{{- $pairs := list -}}
{{- range $key, $value := include "riverlog.operatorSelectorLabels" . | fromYaml -}}
{{- $pairs = append $pairs (printf "%s=%s" $key $value) -}}
{{- end -}}
{{- join "," $pairs -}}
{{- end -}}

{{- define "riverlog.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "riverlog.operatorName" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "riverlog.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The Connect image (the Dockerfile's connect stage): the default of Connects and Mirrors. */}}
{{- define "riverlog.connectImage" -}}
{{- printf "%s:%s" .Values.connect.image.repository (default .Chart.AppVersion .Values.connect.image.tag) -}}
{{- end -}}

{{/* Kopf's peering object: the operator's fixed name (riverlog_operator.app.PEERING_NAME). */}}
{{- define "riverlog.peeringName" -}}
riverlog-operator
{{- end -}}

{{- define "riverlog.clusterName" -}}
{{- default .Release.Name .Values.cluster.name -}}
{{- end -}}

{{/* The operator's rules on namespaced objects (all namespaces, or each watched one). */}}
{{- define "riverlog.namespacedRules" -}}
# Riverlog's resources (Cluster, Topic, User; Connect, Connector, Mirror of issue #19): kopf
# watches them and patches its finalizer and progress annotations onto them; the handlers write
# their status.
- apiGroups: [riverlog.dev]
  resources: [clusters, topics, users, connects, connectors, mirrors]
  verbs: [get, list, watch, patch]
- apiGroups: [riverlog.dev]
  resources: [clusters/status, topics/status, users/status, connects/status, connectors/status, mirrors/status]
  verbs: [get, patch]
# Children carry ownerReferences with blockOwnerDeletion, which needs update on the owner's
# finalizers (the OwnerReferencesPermissionEnforcement admission plugin checks it); a User owns
# its credentials Secret, a Connect and a Mirror their workers' Deployment, ConfigMap, Service
# and PodDisruptionBudget.
- apiGroups: [riverlog.dev]
  resources: [clusters/finalizers, users/finalizers, connects/finalizers, mirrors/finalizers]
  verbs: [update]
# What the builders make, applied with server-side apply (create when absent, else patch):
# brokers' StatefulSets, Connect workers' Deployments. Deletion is left to the garbage
# collector (owner references).
- apiGroups: [apps]
  resources: [statefulsets, deployments]
  verbs: [get, list, watch, create, patch]
- apiGroups: [""]
  resources: [configmaps, services, serviceaccounts]
  verbs: [get, list, watch, create, patch]
- apiGroups: [policy]
  resources: [poddisruptionbudgets]
  verbs: [get, list, watch, create, patch]
# A Cluster's schema registry (spec.schemaRegistry) removed or disabled: the operator deletes
# its Deployment, Service and ConfigMap by name, only those the Cluster owns (read first, then
# deleted with a uid precondition). The garbage collector would only remove them with the Cluster.
- apiGroups: [apps]
  resources: [deployments]
  verbs: [delete]
- apiGroups: [""]
  resources: [services, configmaps]
  verbs: [delete]
# The NetworkPolicy guarding each Connect's and Mirror's REST API: server-side apply (create
# when absent, else patch); with connect.networkPolicy.enabled false the operator reads one
# left from before and deletes it if the Connect or Mirror owns it (get, delete).
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [get, create, patch, delete]
# Broker pods: readiness, the rack annotation (patch), rolling restarts one pod at a time
# (delete).
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch, patch, delete]
# storage.deleteClaim: the volume claims of removed brokers and of a deleted Cluster.
- apiGroups: [""]
  resources: [persistentvolumeclaims]
  verbs: [get, list, delete]
# Events about reconciliation (kopf's and the handlers' own).
- apiGroups: [""]
  resources: [events]
  verbs: [create]
# Key material of secured Clusters (issue #18): CAs, keystores, Users' credentials. Read by name
# and written, never listed or watched (the operator cannot enumerate a namespace's Secrets);
# the chart's ValidatingAdmissionPolicy refuses any write to a Secret the operator does not own.
- apiGroups: [""]
  resources: [secrets]
  verbs: [get, create, patch]
{{- end -}}
