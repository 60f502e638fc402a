"""The local control plane: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok
as plain processes on 127.0.0.1, built from the Kubernetes Go modules (build.sh), with fake nodes.

- `launcher`: start, supervise and stop one (the command line: ``python -m hack.localk8s``);
- `testcluster`: how a test session, the fault suite or a benchmark finds or starts one;
- `target`: whether a cluster named by `RAYSCALE_TARGET_KUBECONFIG` may be used (never one nobody named).

See README.md beside this file.
"""
