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

{{/* The namespaces the operator watches; empty means all. */}}
{{- define "rayscale.watchNamespaces" -}}
{{- if .Values.singleNamespaceInstall -}}
{{- list .Release.Namespace | toJson -}}
{{- else -}}
{{- .Values.watchNamespace | default list | toJson -}}
{{- end -}}
{{- end -}}

{{/* The rules rayscale needs in a watched namespace: exactly the calls it makes. */}}
{{- define "rayscale.namespacedRules" -}}
- apiGroups: ["ray.io"]
  resources: ["rayclusters"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["ray.io"]
  resources: ["rayclusters/status"]
  verbs: ["get", "patch"]
- apiGroups: ["rayscale.io"]
  resources: ["rayresourcerequests"]
  verbs: ["get", "list", "watch", "patch"]
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
- apiGroups: ["networking.k8s.io"]
  resources: ["ingresses"]
  verbs: ["create"]
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["get", "create"]
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
  verbs: ["create", "patch"]
{{- end -}}
