package mcp

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// request decodes args as mcp-go does: JSON to a map of any.
func request(t *testing.T, args string) mcp.CallToolRequest {
	t.Helper()
	var req mcp.CallToolRequest
	if err := json.Unmarshal([]byte(`{"name":"x","arguments":`+args+`}`), &req.Params); err != nil {
		t.Fatal(err)
	}
	return req
}

// sampleArgs gives every field of t a value of its type, as JSON.
func sampleArgs(t reflect.Type) string {
	m := map[string]any{}
	for i := range t.NumField() {
		sf := t.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		switch sf.Type.Kind() {
		case reflect.String:
			m[name] = "v \"" + name + "\"\n\u00e9"
		case reflect.Bool:
			m[name] = true
		case reflect.Int, reflect.Int64, reflect.Int32:
			m[name] = 4096 + i
		case reflect.Float64:
			m[name] = 0.5 + float64(i)
		case reflect.Slice:
			m[name] = []string{"a", name}
		}
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// Every tool's input binds to what mcp-go's JSON round trip gives.
func TestBindArgumentsMatchesTheJSONRoundTrip(t *testing.T) {
	for _, in := range []any{
		&AgentRunInput{}, &ReadFileInput{}, &WriteFileInput{}, &EditFileInput{}, &NetworkLogInput{},
		&SessionCreateInput{}, &SessionListInput{}, &SessionControlInput{}, &SessionDiffInput{},
		&ShellExecInput{}, &ShellWaitInput{}, &ShellKillInput{}, &TaskListInput{}, &TaskClaimInput{},
		&TaskUpdateInput{}, &TaskAddInput{}, &UsageReportInput{}, &UsageRecordInput{}, &SessionWatchInput{},
	} {
		typ := reflect.TypeOf(in).Elem()
		for _, args := range []string{sampleArgs(typ), `{}`, `{"unknown":1}`} {
			req := request(t, args)
			want := reflect.New(typ).Interface()
			if err := req.BindArguments(want); err != nil {
				t.Fatalf("%s %s: BindArguments: %v", typ.Name(), args, err)
			}
			got := reflect.New(typ).Interface()
			if err := bindArguments(req, got); err != nil {
				t.Fatalf("%s %s: %v", typ.Name(), args, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s %s:\n got %+v\nwant %+v", typ.Name(), args, got, want)
			}
		}
	}
}

// Wrong types are refused with the argument's name; a whole number
// written with an exponent is a whole number.
func TestBindArgumentsRefusesWrongTypes(t *testing.T) {
	for args, want := range map[string]string{
		`{"command": 3}`:                      "command must be a string",
		`{"command": "x", "timeout_ms": 1.5}`: "timeout_ms must be a whole number",
		`{"command": "x", "timeout_ms": "9"}`: "timeout_ms must be a whole number",
	} {
		var in ShellExecInput
		err := bindArguments(request(t, args), &in)
		if err == nil || err.Error() != want {
			t.Errorf("%s: error %v, want %q", args, err, want)
		}
	}
	var in ShellExecInput
	if err := bindArguments(request(t, `{"command": "x", "timeout_ms": 1e3}`), &in); err != nil || in.TimeoutMS != 1000 {
		t.Errorf("timeout_ms 1e3: %v %d, want 1000", err, in.TimeoutMS)
	}
}
