package console

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed static
var static embed.FS

// Prefix is where the console is served.
const Prefix = "/console/"

// csp allows the page's own scripts, styles and API calls, and images
// from the API (fetched with the key, shown as blob: URLs) or from a
// cell's output (data: URLs). No inline script, no eval, and (Trusted
// Types with no policy) no string may become HTML or script through a DOM
// sink such as innerHTML: the page builds its DOM from text nodes only.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; " +
	"require-trusted-types-for 'script'; trusted-types 'none'"

// Handler serves the console under Prefix; Prefix without its slash
// redirects to it (relatively). Only GET and HEAD are served.
func Handler() http.Handler {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is part of the binary
	}
	files := http.StripPrefix(Prefix, http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if r.URL.Path+"/" == Prefix {
			// Relative, so that a base path a proxy strips is kept.
			w.Header().Set("Location", strings.TrimPrefix(Prefix, "/"))
			w.WriteHeader(http.StatusMovedPermanently)
			return
		}
		if !strings.HasPrefix(r.URL.Path, Prefix) {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		files.ServeHTTP(w, r)
	})
}
