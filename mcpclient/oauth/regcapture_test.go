package oauth

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestRegistrationCaptureStrictDecode: a well-formed registration response is captured; its
// twins, a response repeating "client_id" (two values for one field: the one the SDK reads and
// the one a lenient decoder picks) or carrying invalid UTF-8, are not, while the SDK still gets
// the body unchanged.
func TestRegistrationCaptureStrictDecode(t *testing.T) {
	for _, tc := range []struct {
		body    string
		want    string
		capture bool
	}{
		{`{"client_id":"abc","redirect_uris":["http://127.0.0.1/cb"]}`, "abc", true},
		{`{"client_id":"abc","client_id":"evil","redirect_uris":["http://127.0.0.1/cb"]}`, "", false},
		{"{\"client_id\":\"abc\",\"client_name\":\"\xff\"}", "", false},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, tc.body)
		}))
		rc := &registrationCapture{}
		c := rc.wrap(srv.Client(), srv.URL+"/register")
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/register", strings.NewReader(`{}`))
		if err != nil {
			srv.Close()
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			srv.Close()
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		srv.Close()
		if string(got) != tc.body {
			t.Errorf("%s: body changed for the SDK: %q", tc.body, got)
		}
		reg := rc.result()
		if tc.capture != (reg != nil) || (reg != nil && reg.ClientID != tc.want) {
			t.Errorf("%s: captured %+v, want capture=%v client_id %q", tc.body, reg, tc.capture, tc.want)
		}
	}
}
