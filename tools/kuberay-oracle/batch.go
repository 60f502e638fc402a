// The -batch-scheduler option: KubeRay's RayCluster reconciler as the operator runs it when
// started with --batch-scheduler=NAME (volcano, yunikorn, scheduler-plugins, kai-scheduler).
// As KubeRay's main.go does: the configuration is checked by configapi.ValidateBatchSchedulerConfig,
// the plugin is KubeRay's own batchscheduler.NewSchedulerManager on the fake client, and its
// AddToScheme registers the plugin's types. The PodGroup types of Volcano
// (scheduling.volcano.sh/v1beta1) and scheduler-plugins (scheduling.x-k8s.io/v1alpha1) are in
// every run's scheme, so that the PodGroups are read back with the other objects (none without
// the option).
package main

import (
	"context"
	"flag"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	schedulerpluginsv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	volcanov1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	configapi "github.com/ray-project/kuberay/ray-operator/apis/config/v1alpha1"
	"github.com/ray-project/kuberay/ray-operator/controllers/ray"
	"github.com/ray-project/kuberay/ray-operator/controllers/ray/batchscheduler"
)

var batchSchedulerName = flag.String("batch-scheduler", "", "run KubeRay's reconciler with this batch scheduler (KubeRay's --batch-scheduler): volcano, yunikorn, scheduler-plugins, kai-scheduler")

func init() {
	kinds = append(kinds,
		listed{"scheduling.volcano.sh/v1beta1", "PodGroup", func() client.ObjectList { return &volcanov1beta1.PodGroupList{} }},
		listed{"scheduling.x-k8s.io/v1alpha1", "PodGroup", func() client.ObjectList { return &schedulerpluginsv1alpha1.PodGroupList{} }},
	)
}

// addPodGroupTypes registers both PodGroup kinds (to list them back).
func addPodGroupTypes(scheme *runtime.Scheme) error {
	if err := volcanov1beta1.AddToScheme(scheme); err != nil {
		return err
	}
	return schedulerpluginsv1alpha1.AddToScheme(scheme)
}

// reconcilerOptions: KubeRay's options with the batch scheduler of -batch-scheduler, if any.
func reconcilerOptions(ctx context.Context, c client.Client, scheme *runtime.Scheme) (ray.RayClusterReconcilerOptions, error) {
	if *batchSchedulerName == "" {
		return ray.RayClusterReconcilerOptions{}, nil
	}
	config := configapi.Configuration{BatchScheduler: *batchSchedulerName}
	if err := configapi.ValidateBatchSchedulerConfig(logr.Discard(), config); err != nil {
		return ray.RayClusterReconcilerOptions{}, err
	}
	manager, err := batchscheduler.NewSchedulerManager(ctx, config, nil, c)
	if err != nil {
		return ray.RayClusterReconcilerOptions{}, err
	}
	manager.AddToScheme(scheme)
	return ray.RayClusterReconcilerOptions{BatchSchedulerManager: manager}, nil
}

// getWithKind reads as KubeRay's manager reads through its cache, which sets the object's
// apiVersion and kind (controller-runtime's cache_reader.go); the fake client's typed Get leaves
// them empty. scheduler-plugins' plugin writes them into its PodGroup's owner reference.
func getWithKind(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := c.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	gvk, err := apiutil.GVKForObject(obj, c.Scheme())
	if err != nil {
		return err
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return nil
}
