{{/*
One operator Deployment. The context is a dict:
  root        the chart's root context
  name        the Deployment's name
  namespaces  the namespaces (names or patterns) it watches; empty: every namespace
  shard       the shard (an item of .Values.shards), or nil for the one operator of a release
              without shards
  lease       the name of its leader-election Lease
*/}}
{{- define "rayscale.deployment" -}}
{{- $root := .root -}}
{{- $values := $root.Values -}}
{{- $shard := .shard -}}
{{- $replicas := $values.replicas -}}
{{- $resources := $values.resources -}}
{{- if $shard -}}
{{- if hasKey $shard "replicas" }}{{ $replicas = $shard.replicas }}{{ end -}}
{{- if hasKey $shard "resources" }}{{ $resources = $shard.resources }}{{ end -}}
{{- end -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .name }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "rayscale.labels" $root | nindent 4 }}
    {{- if $shard }}
    rayscale.io/shard: {{ $shard.name }}
    {{- end }}
    {{- with $values.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  replicas: {{ $replicas }}
  strategy:
    # With leader election a new pod waits as a standby until the old one releases the Lease;
    # without, the old pod must be gone before the new one starts.
    type: {{ ternary "RollingUpdate" "Recreate" $values.leaderElectionEnabled }}
  selector:
    matchLabels:
      {{- include "rayscale.selectorLabels" $root | nindent 6 }}
      {{- if $shard }}
      rayscale.io/shard: {{ $shard.name }}
      {{- end }}
  template:
    metadata:
      labels:
        {{- include "rayscale.selectorLabels" $root | nindent 8 }}
        {{- if $shard }}
        rayscale.io/shard: {{ $shard.name }}
        {{- end }}
        {{- with include "rayscale.podLabels" $root | fromJson }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- with include "rayscale.podAnnotations" $root | fromJson }}
      annotations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    spec:
      serviceAccountName: {{ include "rayscale.serviceAccountName" $root }}
      {{- with $values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $values.priorityClassName }}
      priorityClassName: {{ . }}
      {{- end }}
      securityContext:
        {{- toYaml $values.podSecurityContext | nindent 8 }}
      containers:
        - name: rayscale
          image: {{ include "rayscale.image" $root | quote }}
          imagePullPolicy: {{ $values.image.pullPolicy }}
          args:
            {{- if .namespaces }}
            {{- range .namespaces }}
            - --namespace={{ . }}
            {{- end }}
            {{- else }}
            - --all-namespaces
            {{- end }}
            {{- if $shard }}
            - --shard={{ $shard.name }}
            {{- with $shard.clusterSelector }}
            - {{ printf "--cluster-selector=%s" . | quote }}
            {{- end }}
            {{- end }}
            - --mode={{ $values.mode }}
            - --concurrency={{ $values.reconcileConcurrency }}
            - --resync-seconds={{ $values.resyncSeconds }}
            - --stuck-terminating-seconds={{ $values.stuckTerminatingSeconds }}
            - --max-pods-per-cluster={{ $values.maxPodsPerCluster }}
            {{- with include "rayscale.batchScheduler" $root }}
            - --batch-scheduler={{ . }}
            {{- end }}
            - --liveness=http://0.0.0.0:{{ $values.healthPort }}/healthz
            - --metrics-port={{ ternary $values.metrics.port 0 $values.metrics.enabled }}
            - --status-port={{ $values.statusPort }}
            {{- if $values.statusPage.enabled }}
            - --status-page
            - --status-page-port={{ $values.statusPage.port }}
            {{- end }}
            {{- if $values.leaderElectionEnabled }}
            - --leader-elect
            - --leader-election-namespace=$(POD_NAMESPACE)
            - --leader-election-id={{ .lease }}
            {{- end }}
            - --kube-api-qps={{ $values.kubeClient.qps }}
            - --kube-api-burst={{ $values.kubeClient.burst }}
            - --autoscaler-interval={{ $values.autoscaler.interval }}
            - --gcs-poll-interval={{ $values.autoscaler.gcsPollInterval }}
            - --autoscaler-concurrency={{ $values.autoscaler.concurrency }}
            - --max-node-provision-seconds={{ $values.autoscaler.maxNodeProvisionSeconds }}
            - --max-node-boot-seconds={{ $values.autoscaler.maxNodeBootSeconds }}
            - --head-restart-grace-seconds={{ $values.autoscaler.headRestartGraceSeconds }}
            {{- if $values.autoscaler.allowGcsAddressOverride }}
            - --allow-gcs-address-override
            {{- end }}
            {{- range $values.autoscaler.disruptionNotices }}
            - --disruption-notice={{ . }}
            {{- end }}
          env:
            - name: POD_NAMESPACE
              valueFrom:
                fieldRef:
                  fieldPath: metadata.namespace
            - name: POD_NAME
              valueFrom:
                fieldRef:
                  fieldPath: metadata.name
            {{- with $values.env }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          ports:
            - name: health
              containerPort: {{ $values.healthPort }}
            {{- if $values.metrics.enabled }}
            - name: metrics
              containerPort: {{ $values.metrics.port }}
            {{- end }}
            {{- if $values.statusPort }}
            - name: status
              containerPort: {{ $values.statusPort }}
            {{- end }}
            {{- if $values.statusPage.enabled }}
            - name: status-page
              containerPort: {{ $values.statusPage.port }}
            {{- end }}
          livenessProbe:
            httpGet:
              path: /healthz
              port: health
            {{- toYaml $values.livenessProbe | nindent 12 }}
          readinessProbe:
            httpGet:
              path: /healthz
              port: health
            {{- toYaml $values.readinessProbe | nindent 12 }}
          resources:
            {{- toYaml $resources | nindent 12 }}
          securityContext:
            {{- toYaml $values.securityContext | nindent 12 }}
      {{- with $values.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $values.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $values.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
{{- end -}}
