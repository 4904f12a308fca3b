package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"go.yaml.in/yaml/v3"
)

// podSpec is the part of a Deployment's or Job's manifest that runs w8y.
type podSpec struct {
	Kind string `yaml:"kind"`
	Spec struct {
		Template struct {
			Spec struct {
				Containers []struct {
					Name    string   `yaml:"name"`
					Command []string `yaml:"command"`
					Args    []string `yaml:"args"`
					Env     []struct {
						Name  string `yaml:"name"`
						Value string `yaml:"value"`
					} `yaml:"env"`
				} `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

// TestKubernetesManifests parses the manifests in scripts/kubernetes and
// checks that each w8y container's command line and W8Y_* variables are
// valid options of this w8y, so that a renamed or retired option cannot
// leave them behind.
func TestKubernetesManifests(t *testing.T) {
	paths, err := filepath.Glob("scripts/kubernetes/*.yaml")
	if err != nil || len(paths) < 2 {
		t.Fatalf("manifests %q, %v", paths, err)
	}
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var m podSpec
		if err := yaml.Unmarshal(data, &m); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		found := false
		for _, c := range m.Spec.Template.Spec.Containers {
			argv := append(slices.Clone(c.Command), c.Args...)
			switch {
			case len(c.Command) > 0 && c.Command[0] == "w8y":
				argv = argv[1:]
			case len(c.Command) == 0 && c.Name == "w8y":
			default:
				continue
			}
			found = true
			t.Run(path+"/"+c.Name, func(t *testing.T) {
				for _, e := range c.Env {
					if e.Value != "" {
						t.Setenv(e.Name, e.Value)
					}
				}
				o, err := parseOptions(argv, nil)
				if err != nil {
					t.Fatalf("w8y %q: %v", argv, err)
				}
				if len(o.Command) == 0 || o.KeyPrefix == "" {
					t.Errorf("w8y %q: command %q, prefix %q", argv, o.Command, o.KeyPrefix)
				}
			})
		}
		if !found {
			t.Errorf("%s runs no w8y", path)
		}
	}
}
