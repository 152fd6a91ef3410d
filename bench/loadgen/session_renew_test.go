package main

import (
	"crypto/ecdh"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeWrit plays the server side of caller sessions: POST /v1/sessions opens one (ttl_ms asked, at most
// maxTTL), any other request must carry a request token of a session it knows and that has not expired
// (else 401 CALLER_SESSION_INVALID) whose MAC, htm and htu verify.
type fakeWrit struct {
	t          *testing.T
	maxTTL     time.Duration
	mu         sync.Mutex
	keys       map[string][]byte
	expires    map[string]time.Time
	opens      int
	answered   []string        // per request (not opens): the session token and the status
	leftAtOpen []time.Duration // per open after the first: the life the latest session had left
	refuseAll  bool            // every session refused, as if each were unknown
}

func newFakeWrit(t *testing.T, maxTTL time.Duration) (*fakeWrit, *httptest.Server) {
	f := &fakeWrit{t: t, maxTTL: maxTTL, keys: map[string][]byte{}, expires: map[string]time.Time{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv
}

// forget: the sessions opened so far are unknown from now on (a restart with other keys).
func (f *fakeWrit) forget() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keys = map[string][]byte{}
}

func (f *fakeWrit) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	parts := strings.Split(strings.TrimPrefix(r.Header.Get("authorization"), "Bearer "), ".")
	var header struct{ Alg, Kid string }
	_ = json.Unmarshal(must(b64.DecodeString(parts[0])), &header)
	problem := func(status int, code string) {
		w.Header().Set("content-type", "application/problem+json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"code":%q}`, code)
	}
	if r.URL.Path == "/v1/sessions" {
		if f.opens > 0 {
			f.leftAtOpen = append(f.leftAtOpen, time.Until(f.expires[fmt.Sprintf("ws1.fake.%d", f.opens)]))
		}
		f.opens++
		if header.Alg != "EdDSA" {
			f.t.Errorf("a session opened with %s, not an assertion", header.Alg)
		}
		var req struct {
			PublicKey struct{ X string } `json:"public_key"`
			TTLms     int64              `json:"ttl_ms"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			f.t.Error(err)
		}
		// The opening assertion is bound to the body's key and to this request (README "Caller sessions" step 1).
		var opening struct {
			Cnf struct {
				Jwk struct{ Kty, Crv, X string }
			}
			Htm, Htu string
		}
		_ = json.Unmarshal(must(b64.DecodeString(parts[1])), &opening)
		if opening.Cnf.Jwk.Kty != "OKP" || opening.Cnf.Jwk.Crv != "X25519" || opening.Cnf.Jwk.X != req.PublicKey.X || opening.Htm != r.Method || opening.Htu != r.URL.Path {
			f.t.Errorf("the opening assertion is not bound to the body's key %s and POST %s: %+v", req.PublicKey.X, r.URL.Path, opening)
			problem(http.StatusUnauthorized, "UNAUTHENTICATED")
			return
		}
		ttl := f.maxTTL
		if req.TTLms > 0 && time.Duration(req.TTLms)*time.Millisecond < ttl {
			ttl = time.Duration(req.TTLms) * time.Millisecond
		}
		priv := must(ecdh.X25519().GenerateKey(rand.Reader))
		serverX := b64.EncodeToString(priv.PublicKey().Bytes())
		shared := must(priv.ECDH(must(ecdh.X25519().NewPublicKey(must(b64.DecodeString(req.PublicKey.X))))))
		token := fmt.Sprintf("ws1.fake.%d", f.opens)
		f.keys[token] = must(sessionKey(shared, req.PublicKey.X, serverX))
		f.expires[token] = time.Now().Add(ttl)
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"session":%q,"public_key":{"kty":"OKP","crv":"X25519","x":%q},"expires_at":%q}`, token, serverX, f.expires[token].UTC().Format("2006-01-02T15:04:05.000Z07:00"))
		return
	}
	key, known := f.keys[header.Kid]
	if header.Alg != "HS256" || !known || f.refuseAll || !time.Now().Before(f.expires[header.Kid]) {
		f.answered = append(f.answered, header.Kid+" 401")
		problem(http.StatusUnauthorized, "CALLER_SESSION_INVALID")
		return
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(parts[0] + "." + parts[1]))
	var claims struct{ Htm, Htu string }
	_ = json.Unmarshal(must(b64.DecodeString(parts[1])), &claims)
	if !hmac.Equal(must(b64.DecodeString(parts[2])), mac.Sum(nil)) || claims.Htm != r.Method || claims.Htu != r.URL.Path {
		f.answered = append(f.answered, header.Kid+" 401")
		problem(http.StatusUnauthorized, "UNAUTHENTICATED")
		return
	}
	f.answered = append(f.answered, header.Kid+" 200")
	fmt.Fprint(w, `{"allow":true}`)
}

func testSigner() *signer {
	return &signer{key: ed25519.NewKeyFromSeed(make([]byte, 32)), kid: "k-1", principal: "seo-agent-7"}
}

// A run longer than the session's life: the next session is opened when a fifth of the current one's life
// is left, so no request is ever sent with an expired session. The life is the ttl asked for
// (-session-ttl-ms) or, asking for none, the server's maximum (its expires_at).
func TestSessionRenewedBeforeExpiry(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ask    int
		maxTTL time.Duration
	}{{"ttl asked", 1000, time.Hour}, {"the server's maximum", 0, time.Second}} {
		t.Run(tc.name, func(t *testing.T) {
			f, srv := newFakeWrit(t, tc.maxTTL)
			*url, *sessTTL = srv.URL, tc.ask
			defer func() { *sessTTL = 0 }()
			a := must(testSigner().authorizer(httpClient(), true))
			for end := time.Now().Add(2500 * time.Millisecond); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
				if err := a.call("POST", "/v1/decisions", []byte(`{}`), nil); err != nil {
					t.Fatal(err)
				}
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			for _, s := range f.answered {
				if !strings.HasSuffix(s, " 200") {
					t.Fatalf("a request refused: %s", s)
				}
			}
			// Opened at 0 and renewed about every 0.8 s: at 0.8, 1.6 and 2.4 s, a fifth of the life ahead.
			if f.opens < 3 || f.opens > 5 {
				t.Fatalf("%d opens in 2.5 s of 1 s sessions", f.opens)
			}
			for _, left := range f.leftAtOpen {
				// A fifth (200 ms), less up to the 20 ms between requests and a busy machine's delays, plus the
				// time between the client's sending the open and the server's counting the life from its answer.
				if left < 50*time.Millisecond || left > 300*time.Millisecond {
					t.Fatalf("a session renewed with %s of its 1 s left (want about a fifth): %v", left, f.leftAtOpen)
				}
			}
		})
	}
}

// A session the server no longer knows (401 CALLER_SESSION_INVALID): one new session and the request once
// more; refused again, the error (no loop).
func TestSessionReopenedOnInvalid(t *testing.T) {
	f, srv := newFakeWrit(t, time.Hour)
	*url = srv.URL
	a := must(testSigner().authorizer(httpClient(), true))
	if err := a.call("POST", "/v1/decisions", []byte(`{}`), nil); err != nil {
		t.Fatal(err)
	}
	f.forget()
	if err := a.call("DELETE", "/v1/leases/l-1", []byte(`{}`), nil); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	if got, want := strings.Join(f.answered, ","), "ws1.fake.1 200,ws1.fake.1 401,ws1.fake.2 200"; got != want || f.opens != 2 {
		t.Fatalf("answered %s, %d opens; want %s, 2", got, f.opens, want)
	}
	f.refuseAll = true
	f.mu.Unlock()
	err := a.call("POST", "/v1/decisions", []byte(`{}`), nil)
	var refused *httpError
	if !errors.As(err, &refused) || refused.status != 401 || refused.code() != "CALLER_SESSION_INVALID" {
		t.Fatalf("want the 401 CALLER_SESSION_INVALID, got %v", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.answered) != 5 || f.opens != 3 {
		t.Fatalf("refused again: %d requests, %d opens; want 5, 3 (one re-open, one retry)", len(f.answered), f.opens)
	}
}

// Without sessions (the lease stream's decisions, or no -session): an assertion each, no open.
func TestAssertionsOpenNoSession(t *testing.T) {
	f, srv := newFakeWrit(t, time.Hour)
	*url = srv.URL
	a := must(testSigner().authorizer(httpClient(), false))
	err := a.call("POST", "/v1/decisions", []byte(`{}`), nil)
	var refused *httpError
	// The fake only takes session tokens: the assertion is refused, and not retried.
	if !errors.As(err, &refused) || f.opens != 0 || len(f.answered) != 1 {
		t.Fatalf("%v, %d opens, %d requests", err, f.opens, len(f.answered))
	}
}
