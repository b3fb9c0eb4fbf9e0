package rest_test

import (
	"reflect"
	"slices"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/rest"
)

// The session schemas name exactly the JSON fields of the Go types and
// require exactly those that are always sent; the enums match the domain.
func TestOpenAPISessionSchemasMatchTypes(t *testing.T) {
	e := newEnv(t)
	doc, _ := fetchOpenAPI(t, e)
	tests := []struct {
		schema string
		typ    any
	}{
		{"CreateSessionRequest", airlock.CreateSessionRequest{}},
		{"NetworkPolicy", airlock.NetworkPolicy{}},
		{"Session", airlock.Session{}},
		{"SessionLimits", airlock.SessionLimits{}},
		{"SessionUsage", airlock.SessionUsage{}},
		{"RunningExec", airlock.RunningExec{}},
		{"SessionPage", airlock.SessionPage{}},
		{"ExtendRequest", rest.ExtendRequest{}},
		{"SessionExecRequest", airlock.SessionExecRequest{}},
		{"SignalRequest", rest.SignalRequest{}},
		{"FileEntry", airlock.FileEntry{}},
		{"FileList", airlock.FileList{}},
		{"PutFileResult", airlock.PutFileResult{}},
		{"CreateContextRequest", airlock.CreateContextRequest{}},
		{"CodeContext", airlock.CodeContext{}},
		{"ContextList", rest.ContextList{}},
		{"RunCellRequest", airlock.RunCellRequest{}},
		{"CellError", airlock.CellError{}},
		{"CellOutput", airlock.CellOutput{}},
		{"CellResult", airlock.CellResult{}},
		{"Snapshot", airlock.Snapshot{}},
		{"SnapshotPage", airlock.SnapshotPage{}},
		{"CreateSnapshotRequest", airlock.CreateSnapshotRequest{}},
		{"ForkRequest", airlock.ForkRequest{}},
		{"ForkResult", airlock.ForkResult{}},
		{"SessionLifecycle", airlock.SessionLifecycle{}},
		{"Event", airlock.Event{}},
		{"EventPage", airlock.EventPage{}},
		{"CreateWebhookRequest", airlock.CreateWebhookRequest{}},
		{"Webhook", airlock.Webhook{}},
		{"WebhookPage", airlock.WebhookPage{}},
		{"WebhookDelivery", airlock.WebhookDelivery{}},
		{"WebhookDeliveryPage", airlock.WebhookDeliveryPage{}},
	}
	for _, tt := range tests {
		t.Run(tt.schema, func(t *testing.T) {
			s, ok := doc.Components.Schemas[tt.schema]
			if !ok {
				t.Fatalf("no schema %s", tt.schema)
			}
			var props []string
			for k := range s.Properties {
				props = append(props, k)
			}
			slices.Sort(props)
			fields, always := jsonFields(reflect.TypeOf(tt.typ))
			fields = withDeprecated(t, s.Properties, tt.schema, fields)
			if !slices.Equal(props, fields) {
				t.Errorf("schema properties %v, Go JSON fields %v", props, fields)
			}
			required := slices.Clone(s.Required)
			slices.Sort(required)
			// A request's members are optional on the wire even where the
			// Go field has no omitempty; responses are held to the tags.
			if tt.schema != "CreateSessionRequest" && tt.schema != "SessionExecRequest" &&
				tt.schema != "RunCellRequest" && tt.schema != "CreateContextRequest" && tt.schema != "ExtendRequest" &&
				tt.schema != "SignalRequest" && tt.schema != "CreateSnapshotRequest" && tt.schema != "ForkRequest" && !slices.Equal(required, always) {
				t.Errorf("schema required %v, Go fields without omitempty %v", required, always)
			}
		})
	}
	var states []string
	for _, st := range airlock.SessionStates {
		states = append(states, string(st))
	}
	if got := doc.Components.Schemas["SessionState"].Enum; !slices.Equal(got, states) {
		t.Errorf("SessionState enum %v, want %v", got, states)
	}
	var sizes []string
	for _, z := range airlock.SessionSizes {
		sizes = append(sizes, string(z))
	}
	if got := doc.Components.Schemas["SessionSize"].Enum; !slices.Equal(got, sizes) {
		t.Errorf("SessionSize enum %v, want %v", got, sizes)
	}
}
