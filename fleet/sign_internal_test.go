package fleet

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// flip changes one byte of what it reads: a body altered on the wire
// after the sender hashed it.
type flip struct {
	io.ReadCloser
	done bool
}

func (f *flip) Read(p []byte) (int, error) {
	n, err := f.ReadCloser.Read(p)
	if n > 0 && !f.done {
		p[0] ^= 1
		f.done = true
	}
	return n, err
}

// TestSignedBodies: bodies buffered (digest in the signed header) and
// streamed (digest in a signed trailer) arrive whole and verified; one
// altered in flight is refused, the streamed one when it ends.
func TestSignedBodies(t *testing.T) {
	const secret = "a-fleet-secret-of-test"
	sender := &Fleet{cfg: Config{NodeID: "a", Secret: secret}}
	receiver := &Fleet{cfg: Config{NodeID: "b", Secret: secret}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := receiver.verify(r); err != nil {
			http.Error(w, "refused: "+err.Error(), http.StatusUnauthorized)
			return
		}
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "body: "+err.Error(), http.StatusBadRequest)
			return
		}
		w.Write([]byte{byte(len(b) % 251)})
	}))
	defer srv.Close()
	for _, c := range []struct {
		name   string
		size   int
		tamper bool
		want   int
	}{
		{"empty", 0, false, 200},
		{"small", 100, false, 200},
		{"small altered", 100, true, 401},
		{"streamed", 3 << 20, false, 200},
		{"streamed altered", 3 << 20, true, 400},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := bytes.Repeat([]byte("x"), c.size)
			in := httptest.NewRequest(http.MethodPut, "/v1/sessions/s1/files?path=/x", bytes.NewReader(body))
			if c.size == 0 {
				in.Body = http.NoBody
			}
			sig, stream, err := sender.sign(in, "b", "")
			if err != nil {
				t.Fatal(err)
			}
			out, _ := http.NewRequest(http.MethodPut, srv.URL+"/v1/sessions/s1/files?path=/x", in.Body)
			out.ContentLength = in.ContentLength
			for k, v := range sig {
				out.Header[k] = v
			}
			if stream != nil {
				stream(out)
			}
			if c.tamper {
				out.Body = &flip{ReadCloser: out.Body}
			}
			resp, err := http.DefaultClient.Do(out)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.want {
				t.Fatalf("%d %s, want %d", resp.StatusCode, b, c.want)
			}
			if c.want == 200 && (len(b) != 1 || int(b[0]) != c.size%251) {
				t.Fatalf("the receiver read another body: %q", b)
			}
			if c.want != 200 && !strings.Contains(string(b), "match") {
				t.Fatalf("refused for another reason: %s", b)
			}
		})
	}
	// A forward signed for node b is refused by node c.
	in := httptest.NewRequest(http.MethodGet, "/v1/sessions/s1", nil)
	sig, _, _ := sender.sign(in, "b", "")
	in.Header = sig
	other := &Fleet{cfg: Config{NodeID: "c", Secret: secret}}
	if _, err := other.verify(in); err != errSigBad {
		t.Fatalf("a forward for b verified on c: %v", err)
	}
}

func TestEtcdConfigValidate(t *testing.T) {
	for _, c := range []struct {
		cfg EtcdConfig
		ok  bool
	}{
		{EtcdConfig{Endpoints: []string{"http://127.0.0.1:2379"}}, true},
		{EtcdConfig{Endpoints: []string{"https://e:2379"}, CAFile: "ca.pem", CertFile: "c.pem", KeyFile: "k.pem", Username: "u", Password: "p"}, true},
		{EtcdConfig{}, false},
		{EtcdConfig{Endpoints: []string{"e:2379"}}, false},
		{EtcdConfig{Endpoints: []string{"http://e:2379"}, CAFile: "ca.pem"}, false},
		{EtcdConfig{Endpoints: []string{"https://e:2379"}, CertFile: "c.pem"}, false},
		{EtcdConfig{Endpoints: []string{"https://e:2379"}, Username: "u"}, false},
	} {
		if err := c.cfg.Validate(); (err == nil) != c.ok {
			t.Errorf("%+v: %v, want ok %v", c.cfg, err, c.ok)
		}
	}
	if _, err := (EtcdConfig{Endpoints: []string{"https://e:2379"}, CAFile: "/nonexistent/ca.pem"}).Client(); err == nil {
		t.Error("a missing CA file was accepted")
	}
}
