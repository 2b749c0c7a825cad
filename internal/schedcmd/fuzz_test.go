package schedcmd

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	edgeplugin "github.com/edgesched/edgesched/edge-plugin"
)

// FuzzLoadConfig: no --config file makes the scheduler's configuration
// loader panic (kube-scheduler's decoding, defaulting and validation,
// with EdgePolicy's args in its scheme), nor the plugin's own reading of
// its args (edgeplugin.DecodeArgs, which New runs); a file over the cap
// is refused. Args the plugin accepts are a fixed point of its decoding:
// written as JSON or YAML (a *runtime.Unknown, as a scheduler without
// EdgePolicy's scheme would hand them over) they read back the same, and
// a refusal wraps edgeplugin.ErrArgs. Seeded with the shipped
// configurations (deploy/edge-scheduler, and the Helm chart's rendering
// in deploy/manifests/site.yaml).
func FuzzLoadConfig(f *testing.F) {
	for _, name := range []string{"scheduler-config.yaml", "k3s-extender.yaml", "k3s-extender-policy.yaml"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "edge-scheduler", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	site, err := os.ReadFile(filepath.Join("..", "..", "deploy", "manifests", "site.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	found := false
	for _, doc := range strings.Split(string(site), "\n---\n") {
		var cm struct {
			Data map[string]string `json:"data"`
		}
		if yaml.Unmarshal([]byte(doc), &cm) == nil && strings.Contains(cm.Data["scheduler-config.yaml"], "KubeSchedulerConfiguration") {
			f.Add([]byte(cm.Data["scheduler-config.yaml"]))
			found = true
		}
	}
	if !found {
		f.Fatal("deploy/manifests/site.yaml has no scheduler configuration")
	}
	const head = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: s\n  pluginConfig:\n  - name: EdgePolicy\n    args:\n"
	f.Add([]byte(head + "      modelPath: /m.esa\n      reloadInterval: 1h\n      modelMaxAge: 90s\n      publicKeys: [/k.pub]\n"))
	f.Add([]byte(head + "      modelConfigMap: a/b/c\n      targetThreshold: 2\n      telemetryMaxAge: forever\n"))
	f.Add([]byte(head + "      &a [*a, *a]\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(t.TempDir(), "scheduler-config.yaml")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := (&schedulerOptions{ConfigFile: path}).loadConfig()
		if err != nil {
			if len(b) > maxConfigBytes && !errors.Is(err, errTooLarge) {
				t.Fatalf("%d bytes refused without errTooLarge: %v", len(b), err)
			}
			return
		}
		if len(b) > maxConfigBytes {
			t.Fatalf("loaded %d bytes, over the %d cap", len(b), maxConfigBytes)
		}
		for _, p := range cfg.Profiles {
			for _, pc := range p.PluginConfig {
				if pc.Name != edgeplugin.Name {
					continue
				}
				a, err := edgeplugin.DecodeArgs(pc.Args)
				if err != nil {
					if a != nil || !errors.Is(err, edgeplugin.ErrArgs) {
						t.Fatalf("refusal %v (args %v) does not wrap ErrArgs or returned args", err, a)
					}
					continue
				}
				js, err := json.Marshal(a)
				if err != nil {
					t.Fatalf("accepted args %+v do not encode: %v", a, err)
				}
				ym, err := yaml.JSONToYAML(js)
				if err != nil {
					t.Fatalf("accepted args %s do not encode as YAML: %v", js, err)
				}
				for _, u := range []*runtime.Unknown{{Raw: js, ContentType: runtime.ContentTypeJSON}, {Raw: ym, ContentType: runtime.ContentTypeYAML}} {
					back, err := edgeplugin.DecodeArgs(u)
					if err != nil {
						t.Fatalf("accepted args written as %s refused: %v\n%s", u.ContentType, err, u.Raw)
					}
					if !reflect.DeepEqual(back, a) {
						t.Fatalf("args written as %s changed:\n first %+v\nsecond %+v", u.ContentType, a, back)
					}
				}
			}
		}
	})
}
