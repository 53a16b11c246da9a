package deploy

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/sbx-sandbox/sbx/profiles"
)

// drainTimeout is sbx serve's default --drain-timeout (serve.DefaultDrain;
// not imported, to keep this package free of the server's).
const drainTimeout = 30

// manifests decodes every deploy/kubernetes/*.yaml strictly into its
// k8s.io/api type, picked by kind: an unknown or misspelt field, a value
// of the wrong type or an unknown kind fails. One object a file.
func manifests(t *testing.T) map[string]any {
	t.Helper()
	files, _ := filepath.Glob("kubernetes/*.yaml")
	if len(files) == 0 {
		t.Fatal("no manifests in deploy/kubernetes")
	}
	out := map[string]any{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(b, &tm); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		var obj any
		switch tm.APIVersion + " " + tm.Kind {
		case "v1 Namespace":
			obj = &corev1.Namespace{}
		case "v1 Secret":
			obj = &corev1.Secret{}
		case "v1 ConfigMap":
			obj = &corev1.ConfigMap{}
		case "v1 Service":
			obj = &corev1.Service{}
		case "apps/v1 DaemonSet":
			obj = &appsv1.DaemonSet{}
		case "apps/v1 Deployment":
			obj = &appsv1.Deployment{}
		case "policy/v1 PodDisruptionBudget":
			obj = &policyv1.PodDisruptionBudget{}
		case "autoscaling/v2 HorizontalPodAutoscaler":
			obj = &autoscalingv2.HorizontalPodAutoscaler{}
		default:
			t.Fatalf("%s: apiVersion %q kind %q: not one this test knows", f, tm.APIVersion, tm.Kind)
		}
		if err := yaml.UnmarshalStrict(b, obj); err != nil {
			t.Fatalf("%s: strict decode into %T: %v", f, obj, err)
		}
		out[filepath.Base(f)] = obj
	}
	return out
}

func TestKubernetesManifestsDecodeStrictly(t *testing.T) {
	m := manifests(t)
	for _, want := range []string{"namespace.yaml", "secret.yaml", "configmap.yaml", "service.yaml", "daemonset.yaml", "deployment.yaml", "pdb.yaml", "hpa.yaml"} {
		if m[want] == nil {
			t.Errorf("deploy/kubernetes/%s is missing", want)
		}
	}
	for name, obj := range m {
		if meta, ok := obj.(metav1.ObjectMetaAccessor); ok {
			if ns := meta.GetObjectMeta().GetNamespace(); name != "namespace.yaml" && ns != "sbx" {
				t.Errorf("%s: namespace %q, want sbx", name, ns)
			}
		}
	}
}

// podSpecs are the pod templates of the DaemonSet and the Deployment.
func podSpecs(t *testing.T, m map[string]any) map[string]corev1.PodTemplateSpec {
	return map[string]corev1.PodTemplateSpec{
		"daemonset.yaml":  m["daemonset.yaml"].(*appsv1.DaemonSet).Spec.Template,
		"deployment.yaml": m["deployment.yaml"].(*appsv1.Deployment).Spec.Template,
	}
}

// TestKubernetesPodInvariants: what docs/deploy.md promises of the pod.
// Probes on /healthz and /readyz; nothing privileged (no privileged: true,
// no added capability, every capability dropped, no privilege escalation,
// no host namespace, no hostPath: the documented hostPaths are none); the
// settings sbx needs for its user namespaces (hostUsers: false,
// procMount: Unmasked, seccomp and AppArmor not the runtime's default);
// the grace period past the drain; the token file's mode one sbx accepts.
func TestKubernetesPodInvariants(t *testing.T) {
	m := manifests(t)
	for name, tpl := range podSpecs(t, m) {
		t.Run(name, func(t *testing.T) {
			spec := tpl.Spec
			if spec.HostUsers == nil || *spec.HostUsers {
				t.Errorf("hostUsers is not false: the pod needs a user namespace of its own")
			}
			if spec.HostNetwork || spec.HostPID || spec.HostIPC {
				t.Errorf("a host namespace: network %v, pid %v, ipc %v", spec.HostNetwork, spec.HostPID, spec.HostIPC)
			}
			if g := spec.TerminationGracePeriodSeconds; g == nil || *g <= drainTimeout {
				t.Errorf("terminationGracePeriodSeconds %v: not past the %ds drain", g, drainTimeout)
			}
			if psc := spec.SecurityContext; psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
				t.Errorf("the pod does not run as a non-root uid: %+v", psc)
			}
			for _, v := range spec.Volumes {
				if v.HostPath != nil {
					t.Errorf("volume %s is a hostPath %s: docs/deploy.md documents none", v.Name, v.HostPath.Path)
				}
				if v.Secret != nil && (v.Secret.DefaultMode == nil || *v.Secret.DefaultMode&0o007 != 0) {
					t.Errorf("secret volume %s: defaultMode %v lets others read the tokens; sbx refuses that", v.Name, v.Secret.DefaultMode)
				}
			}
			if len(spec.Containers) == 0 {
				t.Fatal("no container")
			}
			for _, c := range append(spec.InitContainers, spec.Containers...) {
				sc := c.SecurityContext
				if sc == nil {
					t.Errorf("container %s: no securityContext", c.Name)
					continue
				}
				if sc.Privileged != nil && *sc.Privileged {
					t.Errorf("container %s: privileged: true", c.Name)
				}
				if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
					t.Errorf("container %s: allowPrivilegeEscalation is not false", c.Name)
				}
				if sc.Capabilities == nil || len(sc.Capabilities.Add) > 0 || !slices.Contains(sc.Capabilities.Drop, "ALL") {
					t.Errorf("container %s: capabilities %+v, want drop ALL and add none", c.Name, sc.Capabilities)
				}
				if sc.ProcMount == nil || *sc.ProcMount != corev1.UnmaskedProcMount {
					t.Errorf("container %s: procMount %v, want Unmasked (a sandbox mounts a fresh /proc)", c.Name, sc.ProcMount)
				}
				if sc.SeccompProfile == nil || sc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault {
					t.Errorf("container %s: seccompProfile %+v: the runtime's default refuses user namespaces", c.Name, sc.SeccompProfile)
				}
				if sc.AppArmorProfile == nil || sc.AppArmorProfile.Type == corev1.AppArmorProfileTypeRuntimeDefault {
					t.Errorf("container %s: appArmorProfile %+v: the runtime's default denies mount", c.Name, sc.AppArmorProfile)
				}
			}
			c := spec.Containers[0]
			for probe, want := range map[*corev1.Probe]string{c.LivenessProbe: "/healthz", c.ReadinessProbe: "/readyz"} {
				if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != want {
					t.Errorf("container %s: no HTTP probe on %s: %+v", c.Name, want, probe)
				}
			}
			if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
				t.Errorf("container %s: no cpu and memory requests", c.Name)
			}
		})
	}
}

// TestKubernetesWiring: the pieces point at each other. The Service and
// the PDB select the pods; the HPA scales the Deployment on a metric sbx
// exports; the token file and the profile files that args name are in the
// mounted Secret and ConfigMap; and each profile in the ConfigMap loads.
func TestKubernetesWiring(t *testing.T) {
	m := manifests(t)
	svc := m["service.yaml"].(*corev1.Service)
	pdb := m["pdb.yaml"].(*policyv1.PodDisruptionBudget)
	pdbSel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	cm := m["configmap.yaml"].(*corev1.ConfigMap)
	secret := m["secret.yaml"].(*corev1.Secret)
	for name, tpl := range podSpecs(t, m) {
		lbl := labels.Set(tpl.Labels)
		if !labels.SelectorFromSet(svc.Spec.Selector).Matches(lbl) {
			t.Errorf("service.yaml does not select %s's pods", name)
		}
		if !pdbSel.Matches(lbl) {
			t.Errorf("pdb.yaml does not select %s's pods", name)
		}
		c := tpl.Spec.Containers[0]
		mounts := map[string]string{}
		for _, vm := range c.VolumeMounts {
			mounts[vm.Name] = vm.MountPath
		}
		for _, v := range tpl.Spec.Volumes {
			switch {
			case v.Secret != nil && v.Secret.SecretName == secret.Name:
				for k := range secret.StringData {
					if !slices.Contains(c.Args, "--token-file="+mounts[v.Name]+"/"+k) {
						t.Errorf("%s: args %v do not read the token file %s/%s", name, c.Args, mounts[v.Name], k)
					}
				}
			case v.ConfigMap != nil && v.ConfigMap.Name == cm.Name:
				for _, a := range c.Args {
					refs, ok := strings.CutPrefix(a, "--profiles=")
					if !ok {
						continue
					}
					for _, ref := range strings.Split(refs, ",") {
						if dir, key := filepath.Split(ref); filepath.Clean(dir) == mounts[v.Name] && cm.Data[key] == "" {
							t.Errorf("%s: --profiles names %s, not in %s", name, ref, cm.Name)
						}
					}
				}
			}
		}
	}
	dir := t.TempDir()
	for key, body := range cm.Data {
		p := filepath.Join(dir, key)
		os.WriteFile(p, []byte(body), 0o644)
		if _, err := profiles.Load(p); err != nil {
			t.Errorf("configmap.yaml: profile %s does not load: %v", key, err)
		}
	}
	hpa := m["hpa.yaml"].(*autoscalingv2.HorizontalPodAutoscaler)
	dep := m["deployment.yaml"].(*appsv1.Deployment)
	if hpa.Spec.ScaleTargetRef.Kind != "Deployment" || hpa.Spec.ScaleTargetRef.Name != dep.Name {
		t.Errorf("hpa.yaml scales %+v, not the Deployment %s", hpa.Spec.ScaleTargetRef, dep.Name)
	}
	metrics, err := os.ReadFile("../serve/metrics.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, mt := range hpa.Spec.Metrics {
		if mt.Pods == nil || !strings.Contains(string(metrics), `"`+mt.Pods.Metric.Name+`"`) {
			t.Errorf("hpa.yaml: metric %+v is not one sbx serve exports (serve/metrics.go)", mt)
		}
	}
}
