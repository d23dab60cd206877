package tests

import (
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/sdpshim/sdpshim/shim/config"
)

// The Kubernetes manifests of deploy/kubernetes, checked offline: every
// document decodes into the Kubernetes API's own Go types with unknown
// fields refused (a misspelt or misplaced field fails), and what ties the
// files together holds: the agent's flags match its mounts, probes and
// the pods' group; the pod snippet preloads a library from its mount,
// points SDPSHIM_RUNDIR at its mount of the agent's directory, and its
// SDPSHIM_* values load. Required fields and value formats, which the
// types do not enforce, are TestDeployManifestsSchema's
// (deploy_schema_test.go).
func TestDeployManifests(t *testing.T) {
	objs := map[string]any{}
	for name, doc := range manifestDocs(t) {
		var meta struct{ APIVersion, Kind string }
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var obj any
		switch meta.APIVersion + " " + meta.Kind {
		case "v1 Namespace":
			obj = &corev1.Namespace{}
		case "v1 Pod":
			obj = &corev1.Pod{}
		case "apps/v1 DaemonSet":
			obj = &appsv1.DaemonSet{}
		default:
			t.Fatalf("%s: unexpected %s %s", name, meta.APIVersion, meta.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			t.Errorf("%s (%s): %v", name, meta.Kind, err)
		}
		objs[meta.Kind] = obj
	}
	ds, _ := objs["DaemonSet"].(*appsv1.DaemonSet)
	pod, _ := objs["Pod"].(*corev1.Pod)
	if ds == nil || pod == nil || objs["Namespace"] == nil {
		t.Fatalf("want a Namespace, a DaemonSet and a Pod; have %v", objs)
	}
	if ds.Namespace != objs["Namespace"].(*corev1.Namespace).Name {
		t.Errorf("the DaemonSet's namespace %q is not the one created", ds.Namespace)
	}
	if sel := ds.Spec.Selector.MatchLabels; len(sel) == 0 || !subset(sel, ds.Spec.Template.Labels) {
		t.Errorf("selector %v does not select the template's labels %v", sel, ds.Spec.Template.Labels)
	}

	spec := ds.Spec.Template.Spec
	agent := container(t, spec.Containers, "agent")
	flags := map[string]string{}
	for _, a := range agent.Command[2:] {
		k, v, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		flags[k] = v
	}
	if len(agent.Command) < 2 || path.Base(agent.Command[0]) != "sdpshim" || agent.Command[1] != "agent" {
		t.Fatalf("the agent container runs %v, not sdpshim agent", agent.Command)
	}
	hostDir := func(spec corev1.PodSpec, c *corev1.Container, mountPath string) string {
		for _, m := range c.VolumeMounts {
			if m.MountPath == mountPath || strings.HasPrefix(mountPath, m.MountPath+"/") {
				for _, v := range spec.Volumes {
					if v.Name == m.Name && v.HostPath != nil {
						return path.Join(v.HostPath.Path, strings.TrimPrefix(mountPath, m.MountPath))
					}
				}
			}
		}
		return ""
	}
	rundir := hostDir(spec, agent, flags["rundir"])
	if rundir == "" {
		t.Errorf("the agent's --rundir %q is not on a hostPath mount", flags["rundir"])
	}
	if hostDir(spec, agent, flags["lib"]) == "" {
		t.Errorf("the agent's --lib %q is not on a hostPath mount (the uprobes must hit the pods' copy)", flags["lib"])
	}
	_, port, _ := strings.Cut(flags["listen"], ":")
	if p, err := strconv.Atoi(port); err != nil || len(agent.Ports) != 1 || int(agent.Ports[0].ContainerPort) != p {
		t.Errorf("--listen %q, container ports %v", flags["listen"], agent.Ports)
	}
	for _, pr := range []*corev1.Probe{agent.LivenessProbe, agent.ReadinessProbe} {
		if pr == nil || pr.HTTPGet == nil || pr.HTTPGet.Path != "/healthz" || pr.HTTPGet.Port.String() != agent.Ports[0].Name {
			t.Errorf("probe %+v: want GET /healthz on the metrics port", pr)
		}
	}
	if !spec.HostPID {
		t.Error("the agent needs the host's pid namespace to read processes' cgroups")
	}
	gid, _ := strconv.ParseInt(flags["group"], 10, 64)
	if !slices.Contains(spec.SecurityContext.SupplementalGroups, gid) || !slices.Contains(pod.Spec.SecurityContext.SupplementalGroups, gid) {
		t.Errorf("--group %q: the agent's groups %v and the pod's %v must hold it", flags["group"], spec.SecurityContext.SupplementalGroups, pod.Spec.SecurityContext.SupplementalGroups)
	}
	install := container(t, spec.InitContainers, "install")
	libHost := hostDir(spec, install, install.VolumeMounts[0].MountPath)

	app := &pod.Spec.Containers[0]
	var environ []string
	env := map[string]string{}
	for _, e := range app.Env {
		env[e.Name] = e.Value
		environ = append(environ, e.Name+"="+e.Value)
	}
	if got := hostDir(pod.Spec, app, env["SDPSHIM_RUNDIR"]); got != rundir {
		t.Errorf("the pod's SDPSHIM_RUNDIR %q is host %q, the agent's directory is %q", env["SDPSHIM_RUNDIR"], got, rundir)
	}
	if got := hostDir(pod.Spec, app, env["LD_PRELOAD"]); got == "" || !strings.HasPrefix(got, libHost+"/") || path.Base(got) != "libsdpshim.so" {
		t.Errorf("the pod's LD_PRELOAD %q is host %q, not the interposer the agent installs under %q", env["LD_PRELOAD"], got, libHost)
	}
	for name := range env {
		if _, ok := config.LookupKnob(name); strings.HasPrefix(name, "SDPSHIM_") && !ok {
			t.Errorf("the pod sets %s, which is no setting", name)
		}
	}
	if _, err := config.Load(environ); err != nil {
		t.Errorf("the pod's settings: %v", err)
	}
}

func container(t *testing.T, cs []corev1.Container, name string) *corev1.Container {
	t.Helper()
	for i := range cs {
		if cs[i].Name == name {
			return &cs[i]
		}
	}
	t.Fatalf("no container %q", name)
	return nil
}

func subset(a, b map[string]string) bool {
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
