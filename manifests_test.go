package main

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/w8y/w8y/internal/doctest"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// manifestPaths are the Kubernetes manifests that docs/recipes.md shows and
// the tests run.
func manifestPaths(t *testing.T) []string {
	t.Helper()
	paths, err := filepath.Glob("examples/kubernetes/*.yaml")
	if err != nil || len(paths) < 3 {
		t.Fatalf("manifests %q, %v", paths, err)
	}
	return paths
}

// podTemplate decodes a manifest strictly into the Kubernetes API type of
// its kind, as the API server would (an unknown or misspelt field, a
// value of the wrong type, a key given twice are errors), and returns the
// pod spec it runs.
func podTemplate(t *testing.T, path string, data []byte) corev1.PodSpec {
	t.Helper()
	var meta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(data, &meta); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	switch meta.APIVersion + " " + meta.Kind {
	case "apps/v1 Deployment":
		var d appsv1.Deployment
		if err := yaml.UnmarshalStrict(data, &d); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if d.Spec.Selector == nil || !mapsContain(d.Spec.Template.Labels, d.Spec.Selector.MatchLabels) {
			t.Errorf("%s: the selector %v does not select the template's labels %v", path, d.Spec.Selector, d.Spec.Template.Labels)
		}
		return d.Spec.Template.Spec
	case "batch/v1 Job":
		var j batchv1.Job
		if err := yaml.UnmarshalStrict(data, &j); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if p := j.Spec.Template.Spec.RestartPolicy; p != corev1.RestartPolicyNever && p != corev1.RestartPolicyOnFailure {
			t.Errorf("%s: a Job's pods must not restart Always, got %q", path, p)
		}
		return j.Spec.Template.Spec
	}
	t.Fatalf("%s: a %s %s, which this test does not know", path, meta.APIVersion, meta.Kind)
	return corev1.PodSpec{}
}

func mapsContain(m, sub map[string]string) bool {
	for k, v := range sub {
		if m[k] != v {
			return false
		}
	}
	return len(sub) > 0
}

// TestKubernetesManifests decodes the manifests in examples/kubernetes with
// the Kubernetes API's own types, strictly, and checks that each w8y
// container's arguments and W8Y_* variables are valid options of this w8y
// (the image's entrypoint is w8y), and that its probes ask /livez for
// liveness, which a Redis outage does not fail, and /readyz for
// readiness, on the port of W8Y_METRICS_ADDR.
func TestKubernetesManifests(t *testing.T) {
	for _, path := range manifestPaths(t) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		spec := podTemplate(t, path, data)
		found := false
		for _, c := range spec.Containers {
			if len(c.Args) == 0 {
				continue // the application beside a sidecar
			}
			found = true
			t.Run(path+"/"+c.Name, func(t *testing.T) {
				env := map[string]string{}
				for _, e := range c.Env {
					if !strings.HasPrefix(e.Name, "W8Y_") {
						t.Errorf("the variable %s is not w8y's", e.Name)
					}
					if e.ValueFrom == nil {
						env[e.Name] = e.Value
						t.Setenv(e.Name, e.Value)
					}
				}
				o, err := parseOptions(c.Args, nil)
				if err != nil {
					t.Fatalf("w8y %q: %v", c.Args, err)
				}
				if len(o.Command) == 0 || o.KeyPrefix == "" {
					t.Errorf("w8y %q: command %q, prefix %q", c.Args, o.Command, o.KeyPrefix)
				}
				checkProbes(t, c, env["W8Y_METRICS_ADDR"])
				if why := spins(o); why != "" {
					t.Errorf("w8y %q: %s", c.Args, why)
				}
				// A drain must end before the kubelet's SIGKILL, with room
				// left for the child to stop once signalled.
				if drain := o.drain(); drain > 0 {
					grace := spec.TerminationGracePeriodSeconds
					if grace == nil || time.Duration(*grace)*time.Second <= drain+time.Duration(o.KillAfter.Flag) {
						t.Errorf("W8Y_DRAIN_TIMEOUT %s plus W8Y_KILL_AFTER %s does not fit in the pod's terminationGracePeriodSeconds", o.DrainTimeout, o.KillAfter)
					}
				}
			})
		}
		if !found {
			t.Errorf("%s runs no w8y", path)
		}
	}
}

// checkProbes checks a w8y container's probes (see TestKubernetesManifests).
func checkProbes(t *testing.T, c corev1.Container, metricsAddr string) {
	t.Helper()
	for probe, want := range map[*corev1.Probe]string{c.LivenessProbe: "/livez", c.ReadinessProbe: "/readyz"} {
		if probe == nil {
			continue
		}
		if metricsAddr == "" {
			t.Errorf("probes without W8Y_METRICS_ADDR, which serves them")
			continue
		}
		if probe.HTTPGet == nil || probe.HTTPGet.Path != want {
			t.Errorf("a probe asks %+v, want %s", probe.ProbeHandler, want)
			continue
		}
		port := probe.HTTPGet.Port.String()
		for _, p := range c.Ports {
			if p.Name == port {
				port = strconv.Itoa(int(p.ContainerPort))
			}
		}
		if !strings.HasSuffix(metricsAddr, ":"+port) {
			t.Errorf("%s probes port %s, but W8Y_METRICS_ADDR is %s", want, port, metricsAddr)
		}
	}
}

// TestDocsManifests: the recipes page shows every manifest in
// examples/kubernetes whole, and no other YAML, so that what it shows is
// what the tests decode and run.
func TestDocsManifests(t *testing.T) {
	var shown []string
	for _, b := range doctest.Blocks(doctest.Page(t, "docs/recipes.md")) {
		if b.Lang == "yaml" {
			shown = append(shown, b.Text)
		}
	}
	for _, path := range manifestPaths(t) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if i := slices.Index(shown, string(data)); i < 0 {
			t.Errorf("docs/recipes.md does not show %s whole", path)
		} else {
			shown = slices.Delete(shown, i, i+1)
		}
	}
	for _, b := range shown {
		t.Errorf("docs/recipes.md shows YAML that is not in examples/kubernetes:\n%s", b)
	}
}

// TestREADMEManifestExcerpts: each piece of YAML that the README shows is
// whole lines, in a row, of one manifest in examples/kubernetes, so that
// it is part of what the tests decode and run.
func TestREADMEManifestExcerpts(t *testing.T) {
	var manifests []string
	for _, path := range manifestPaths(t) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		manifests = append(manifests, "\n"+string(data))
	}
	excerpts := 0
	for _, b := range doctest.Blocks(doctest.Page(t, "README.md")) {
		if b.Lang != "yaml" {
			continue
		}
		excerpts++
		if !slices.ContainsFunc(manifests, func(m string) bool { return strings.Contains(m, "\n"+b.Text) }) {
			t.Errorf("the README shows YAML that is not lines of a manifest in examples/kubernetes:\n%s", b.Text)
		}
	}
	if excerpts == 0 {
		t.Error("the README shows no excerpt of a manifest")
	}
}
