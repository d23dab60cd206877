package tests

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"sigs.k8s.io/yaml"
)

// The Kubernetes API's own schema, offline: the OpenAPI v3 documents
// (one per API group version) that the Kubernetes source publishes in
// api/openapi-spec/v3, taken from the k8s.io/kubernetes module of the
// release that matches the k8s.io/api this module requires. The go
// command fetches that module into its module cache (once; the checksum
// database vouches for it) and it is never built or imported: only the
// JSON documents are read. A manifest is validated against the schema
// whose x-kubernetes-group-version-kind names its apiVersion and kind, as
// a strict validator does: required fields, types, the int32 and
// int64 ranges and the other formats, and no field the schema lacks.

// k8sSpecDir returns the directory of the OpenAPI v3 documents, skipping
// (failing in CI) when the module cannot be had.
func k8sSpecDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "k8s.io/api").Output()
	api := strings.TrimSpace(string(out))
	if err != nil || !strings.HasPrefix(api, "v0.") {
		t.Fatalf("the k8s.io/api version: %q %v", api, err)
	}
	release := "v1." + strings.TrimPrefix(api, "v0.") // k8s.io/api v0.X.Y is Kubernetes v1.X.Y
	// Outside this module, so that go.mod and go.sum stay as they are.
	cmd := exec.Command("go", "mod", "download", "-json", "k8s.io/kubernetes@"+release)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "GO111MODULE=on")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err = cmd.Output()
	var mod struct{ Dir, Sum, Error string }
	if err == nil {
		err = json.Unmarshal(out, &mod)
	}
	if err == nil && mod.Error != "" {
		err = fmt.Errorf("%s", mod.Error)
	}
	if err != nil {
		msg := fmt.Sprintf("k8s.io/kubernetes@%s (the Kubernetes API's schema) from the Go module proxy: %v %s", release, err, stderr.String())
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	t.Logf("schema: k8s.io/kubernetes@%s %s, api/openapi-spec/v3", release, mod.Sum)
	return filepath.Join(mod.Dir, "api", "openapi-spec", "v3")
}

// k8sSchemas validates objects against the OpenAPI v3 documents of dir,
// compiling each group version's document once.
type k8sSchemas struct {
	dir      string
	compiled map[string]*jsonschema.Schema // by apiVersion and kind
}

// validate checks one YAML document against the schema of its apiVersion
// and kind.
func (k *k8sSchemas) validate(doc []byte) error {
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return err
	}
	obj, err := jsonschema.UnmarshalJSON(bytes.NewReader(js))
	if err != nil {
		return err
	}
	m, _ := obj.(map[string]any)
	apiVersion, _ := m["apiVersion"].(string)
	kind, _ := m["kind"].(string)
	if apiVersion == "" || kind == "" {
		return fmt.Errorf("no apiVersion and kind")
	}
	sch, err := k.schema(apiVersion, kind)
	if err != nil {
		return err
	}
	return sch.Validate(obj)
}

// schema compiles the schema of apiVersion and kind.
func (k *k8sSchemas) schema(apiVersion, kind string) (*jsonschema.Schema, error) {
	if s := k.compiled[apiVersion+" "+kind]; s != nil {
		return s, nil
	}
	group, version, ok := strings.Cut(apiVersion, "/")
	file := "apis__" + group + "__" + version + "_openapi.json"
	if !ok {
		group, version, file = "", apiVersion, "api__"+apiVersion+"_openapi.json"
	}
	f, err := os.Open(filepath.Join(k.dir, file))
	if err != nil {
		return nil, fmt.Errorf("apiVersion %s: %w", apiVersion, err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	comps, _ := doc.(map[string]any)["components"].(map[string]any)
	schemas, _ := comps["schemas"].(map[string]any)
	name := ""
	for n, s := range schemas {
		gvks, _ := s.(map[string]any)["x-kubernetes-group-version-kind"].([]any)
		for _, g := range gvks {
			g, _ := g.(map[string]any)
			if g["group"] == group && g["version"] == version && g["kind"] == kind {
				name = n
			}
		}
	}
	if name == "" {
		return nil, fmt.Errorf("%s names no schema of %s %s", file, apiVersion, kind)
	}
	for _, s := range schemas {
		closeObjects(s)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft4) // OpenAPI 3.0's schema objects are draft 4's, extended
	c.AssertFormat()
	for _, f := range k8sFormats {
		c.RegisterFormat(f)
	}
	url := "file:///" + file
	if err := c.AddResource(url, map[string]any{"components": comps}); err != nil {
		return nil, err
	}
	s, err := c.Compile(url + "#/components/schemas/" + name)
	if err != nil {
		return nil, fmt.Errorf("compile %s: %w", name, err)
	}
	if k.compiled == nil {
		k.compiled = map[string]*jsonschema.Schema{}
	}
	k.compiled[apiVersion+" "+kind] = s
	return s, nil
}

// closeObjects refuses fields that a schema with properties does not name
// (strict: the API server drops or refuses them), in s and
// every schema within it.
func closeObjects(s any) {
	switch s := s.(type) {
	case map[string]any:
		if _, ok := s["properties"]; ok {
			if _, ok := s["additionalProperties"]; !ok {
				s["additionalProperties"] = false
			}
		}
		for k, v := range s {
			if k != "default" && k != "enum" && k != "x-kubernetes-group-version-kind" {
				closeObjects(v)
			}
		}
	case []any:
		for _, v := range s {
			closeObjects(v)
		}
	}
}

// k8sFormats are the formats of the Kubernetes schema that JSON Schema
// does not define, checked as the API server decodes them.
var k8sFormats = []*jsonschema.Format{
	{Name: "int32", Validate: intRange(32)},
	{Name: "int64", Validate: intRange(64)},
	{Name: "byte", Validate: func(v any) error {
		if s, ok := v.(string); ok {
			if _, err := base64.StdEncoding.DecodeString(s); err != nil {
				return fmt.Errorf("not base64: %v", err)
			}
		}
		return nil
	}},
	// IntOrString's oneOf checks the type; the string is a name or a
	// percentage, which the schema does not constrain.
	{Name: "int-or-string", Validate: func(any) error { return nil }},
}

// intRange checks that a number is an integer of the given width.
func intRange(bits uint) func(any) error {
	return func(v any) error {
		n, ok := v.(json.Number)
		if !ok {
			return nil // the type keyword's business
		}
		i, ok := new(big.Int).SetString(n.String(), 10)
		lim := new(big.Int).Lsh(big.NewInt(1), bits-1)
		if !ok || i.Cmp(lim) >= 0 || i.Cmp(new(big.Int).Neg(lim)) < 0 {
			return fmt.Errorf("%s is not an int%d", n, bits)
		}
		return nil
	}
}

// manifestDocs returns every YAML document of deploy/kubernetes, named
// by file and index.
func manifestDocs(t *testing.T) map[string][]byte {
	t.Helper()
	files, _ := filepath.Glob("../deploy/kubernetes/*.yaml")
	if len(files) == 0 {
		t.Fatal("no manifests in deploy/kubernetes")
	}
	docs := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range strings.Split(string(b), "\n---\n") {
			docs[fmt.Sprintf("%s#%d", filepath.Base(f), i)] = []byte(doc)
		}
	}
	return docs
}

// TestDeployManifestsSchema validates every manifest of deploy/kubernetes
// against the Kubernetes API's OpenAPI v3 schema of the release whose
// Go types TestDeployManifests decodes them into.
func TestDeployManifestsSchema(t *testing.T) {
	k := &k8sSchemas{dir: k8sSpecDir(t)}
	for name, doc := range manifestDocs(t) {
		if err := k.validate(doc); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestDeployManifestsSchemaRefuses: the schema check is not vacuous.
// Each manifest, broken in one way the Go types would let pass or that
// the API server refuses, fails, and the failure names the field.
func TestDeployManifestsSchemaRefuses(t *testing.T) {
	k := &k8sSchemas{dir: k8sSpecDir(t)}
	docs := manifestDocs(t)
	ds, pod := docs["daemonset.yaml#1"], docs["pod-snippet.yaml#0"]
	if ds == nil || pod == nil {
		t.Fatalf("want daemonset.yaml's second document and pod-snippet.yaml; have %d documents", len(docs))
	}
	cases := []struct {
		name string
		doc  []byte
		edit func(obj map[string]any)
		want string // in the error
	}{
		{"DaemonSet without a selector", ds, func(o map[string]any) { delete(dig(o, "spec"), "selector") }, "missing property 'selector'"},
		{"container without a name", ds, func(o map[string]any) { delete(container0(o, "spec", "template", "spec"), "name") }, "containers/0': missing property 'name'"},
		{"containerPort a string", ds, func(o map[string]any) {
			container0(o, "spec", "template", "spec")["ports"].([]any)[0].(map[string]any)["containerPort"] = "9464"
		}, "containerPort': got string, want integer"},
		{"containerPort beyond int32", ds, func(o map[string]any) {
			container0(o, "spec", "template", "spec")["ports"].([]any)[0].(map[string]any)["containerPort"] = int64(1) << 32
		}, "4294967296 is not an int32"},
		{"hostPath without a path", ds, func(o map[string]any) {
			delete(dig(o, "spec", "template", "spec")["volumes"].([]any)[0].(map[string]any)["hostPath"].(map[string]any), "path")
		}, "hostPath': missing property 'path'"},
		{"env value a number", pod, func(o map[string]any) {
			container0(o, "spec")["env"].([]any)[0].(map[string]any)["value"] = 1
		}, "env/0/value': got number, want string"},
		{"misspelt field", pod, func(o map[string]any) {
			c := container0(o, "spec")
			c["volumeMount"] = c["volumeMounts"]
			delete(c, "volumeMounts")
		}, "'volumeMount' not allowed"},
	}
	for _, tc := range cases {
		var obj map[string]any
		if err := yaml.Unmarshal(tc.doc, &obj); err != nil {
			t.Fatal(err)
		}
		tc.edit(obj)
		b, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		err = k.validate(b)
		switch {
		case err == nil:
			t.Errorf("%s: valid", tc.name)
		case !strings.Contains(err.Error(), tc.want):
			t.Errorf("%s: the error does not name %q: %v", tc.name, tc.want, err)
		default:
			t.Logf("%s: %s", tc.name, strings.ReplaceAll(err.Error(), "\n", " "))
		}
	}
}

// dig returns the object at path in o.
func dig(o map[string]any, path ...string) map[string]any {
	for _, p := range path {
		o = o[p].(map[string]any)
	}
	return o
}

// container0 returns the first container of the pod spec at path.
func container0(o map[string]any, path ...string) map[string]any {
	return dig(o, path...)["containers"].([]any)[0].(map[string]any)
}
