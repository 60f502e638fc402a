{{- define "rayscale.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "rayscale.fullname" -}}
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

{{- define "rayscale.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "rayscale.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "rayscale.selectorLabels" -}}
app.kubernetes.io/name: {{ include "rayscale.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "rayscale.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "rayscale.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The namespaces the operator watches; empty means all. As KubeRay's chart: watchNamespace, else
with singleNamespaceInstall the release namespace. */}}
{{- define "rayscale.watchNamespaces" -}}
{{- if .Values.watchNamespace -}}
{{- .Values.watchNamespace | toJson -}}
{{- else if .Values.singleNamespaceInstall -}}
{{- list .Release.Namespace | toJson -}}
{{- else -}}
{{- list | toJson -}}
{{- end -}}
{{- end -}}

{{/* The rules rayscale needs in a watched namespace: exactly the calls it makes. */}}
{{- define "rayscale.namespacedRules" -}}
# create and delete: the RayCluster of each RayJob
- apiGroups: ["ray.io"]
  resources: ["rayclusters"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["ray.io"]
  resources: ["rayclusters/status"]
  verbs: ["get", "patch"]
# RayJobs, and RayCronJobs (which create RayJobs).
- apiGroups: ["ray.io"]
  resources: ["rayjobs"]
  verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
- apiGroups: ["ray.io"]
  resources: ["rayjobs/status"]
  verbs: ["get", "update", "patch"]
- apiGroups: ["ray.io"]
  resources: ["raycronjobs"]
  verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
- apiGroups: ["ray.io"]
  resources: ["raycronjobs/status"]
  verbs: ["get", "update", "patch"]
# Objects owned by a RayJob or RayCronJob with blockOwnerDeletion (its RayCluster, submitter Job,
# RayJobs): the API server's OwnerReferencesPermissionEnforcement asks for update on its finalizers.
- apiGroups: ["ray.io"]
  resources: ["rayjobs/finalizers", "raycronjobs/finalizers"]
  verbs: ["update"]
- apiGroups: ["rayscale.io"]
  resources: ["rayresourcerequests"]
  # create and delete: a RayJob's request of its entrypoint's resources
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["rayscale.io"]
  resources: ["rayresourcerequests/status"]
  verbs: ["get", "patch"]
- apiGroups: ["rayscale.io"]
  resources: ["rayvirtualclusters"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["rayscale.io"]
  resources: ["rayvirtualclusters/status"]
  verbs: ["get", "patch"]
# Objects owned by a RayVirtualCluster with blockOwnerDeletion: the API server's
# OwnerReferencesPermissionEnforcement asks for update on its finalizers.
- apiGroups: ["rayscale.io"]
  resources: ["rayvirtualclusters/finalizers"]
  verbs: ["update"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list", "watch", "create", "delete"]
- apiGroups: [""]
  resources: ["services"]
  verbs: ["get", "list", "watch", "create", "delete"]
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["create"]
# get: the ResourceQuota that refused a worker pod, read until it has room again (the group's
# launches fail at once while it refuses: docs/queues-and-gangs.md).
- apiGroups: [""]
  resources: ["resourcequotas"]
  verbs: ["get"]
# list: a RayCluster's Kueue Workloads while Kueue gates its pods (a slice Kueue cannot admit is a
# quota refusal at once); nothing is read without Kueue.
- apiGroups: ["kueue.x-k8s.io"]
  resources: ["workloads"]
  verbs: ["list"]
- apiGroups: ["networking.k8s.io"]
  resources: ["ingresses"]
  verbs: ["create"]
# Jobs: the GCS fault-tolerance Redis cleanup, and the RayJobs' submitters (K8sJobMode).
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["get", "list", "watch", "create", "delete"]
{{- if eq .Values.mode "controller" }}
# Ray's autoscaler sidecar of autoscaling clusters: its ServiceAccount, Role and RoleBinding. The
# Role grants pods patch and pods/resize patch, which Kubernetes lets only a holder grant.
- apiGroups: [""]
  resources: ["serviceaccounts"]
  verbs: ["create"]
- apiGroups: ["rbac.authorization.k8s.io"]
  resources: ["roles", "rolebindings"]
  verbs: ["create"]
- apiGroups: [""]
  resources: ["pods", "pods/resize"]
  verbs: ["patch"]
{{- end }}
- apiGroups: ["", "events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch", "list"]
{{- end -}}

{{/* The namespaces that get a Role each: every watched namespace when all are named one by one;
empty (a ClusterRole) when some shard, or the one operator, watches every namespace or a pattern
(`team-*`, `!kube-*`: namespaces not known when the chart is installed). */}}
{{- define "rayscale.rbacNamespaces" -}}
{{- $all := list -}}
{{- $clusterwide := false -}}
{{- if .Values.shards -}}
{{- range .Values.shards -}}
{{- if not .namespaces -}}{{- $clusterwide = true -}}{{- end -}}
{{- $all = concat $all (.namespaces | default list) -}}
{{- end -}}
{{- else -}}
{{- $all = include "rayscale.watchNamespaces" . | fromJsonArray -}}
{{- if not $all -}}{{- $clusterwide = true -}}{{- end -}}
{{- end -}}
{{- range $all -}}
{{- if regexMatch "[*?!,]" . -}}{{- $clusterwide = true -}}{{- end -}}
{{- end -}}
{{- if $clusterwide -}}
{{- list | toJson -}}
{{- else -}}
{{- $all | uniq | sortAlpha | toJson -}}
{{- end -}}
{{- end -}}

{{/* The Leases the release elects leaders on: `<fullname>`, or `<fullname>-<shard>` for each shard. */}}
{{- define "rayscale.leases" -}}
{{- $fullname := include "rayscale.fullname" . -}}
{{- $leases := list -}}
{{- range .Values.shards -}}
{{- $leases = append $leases (printf "%s-%s" $fullname .name) -}}
{{- end -}}
{{- $leases | default (list $fullname) | toJson -}}
{{- end -}}

{{/* Shards that cannot work as asked fail the install, saying why. */}}
{{- define "rayscale.checkShards" -}}
{{- $fullname := include "rayscale.fullname" . -}}
{{- if or .Values.singleNamespaceInstall .Values.watchNamespace -}}
{{- fail "shards: each shard names its namespaces; leave singleNamespaceInstall and watchNamespace unset" -}}
{{- end -}}
{{- $names := list -}}
{{- $scopes := dict -}}
{{- range .Values.shards -}}
{{- if has .name $names -}}
{{- fail (printf "shards: two shards are named %q" .name) -}}
{{- end -}}
{{- $names = append $names .name -}}
{{- if gt (len (printf "%s-%s" $fullname .name)) 63 -}}
{{- fail (printf "shards: %s-%s (the shard's Deployment and Lease) is longer than 63 characters: shorten the shard's name or fullnameOverride" $fullname .name) -}}
{{- end -}}
{{- if and (not $.Values.leaderElectionEnabled) (gt (int (.replicas | default $.Values.replicas)) 1) -}}
{{- fail (printf "shards: shard %s has more than one replica without leaderElectionEnabled" .name) -}}
{{- end -}}
{{- if and (gt (len $.Values.shards) 1) (not .namespaces) (not .clusterSelector) -}}
{{- fail (printf "shards: shard %s has neither namespaces nor a clusterSelector, so it takes every RayCluster, the other shards' too" .name) -}}
{{- end -}}
{{- $scope := printf "%s|%s" (.namespaces | default list | uniq | sortAlpha | join ",") (.clusterSelector | default "") -}}
{{- if hasKey $scopes $scope -}}
{{- fail (printf "shards: shards %s and %s take the same RayClusters (the same namespaces and clusterSelector)" (get $scopes $scope) .name) -}}
{{- end -}}
{{- $_ := set $scopes $scope .name -}}
{{- end -}}
{{- end -}}
