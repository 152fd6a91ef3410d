// One load generator for Writ and its peers (bench/side-by-side.ts drives it), so that every side
// of a comparison is measured by the same client code: closed loops (a client sends its next request
// when the previous one is answered), one keep-alive connection per client (pg-lease -conns N: the
// clients share N pooled connections), latencies per operation.
//
//	loadgen -mode writ-decide|opa|writ-lease|writ-lease-stream|pg-lease|redis-lease -clients 16 -seconds 5 [-conns N] [...]
//
// Prints one JSON object: ops, seconds, per_second, p50_us, p99_us, errors.
//
// With -session (writ-decide, writ-lease) each client opens its own caller session before the measured
// window and signs every request with an HS256 token under the session's key (README "Caller sessions").
// Like the SDK it opens the next session when a fifth of the current one's life is left (in line: that
// one operation's latency includes the open), and once more when Writ refuses a session it no longer
// knows (401 CALLER_SESSION_INVALID: the request had no effect, and is sent again), so a run may outlast
// a session's life.
//
// With -ops N each client makes exactly N operations instead of running for -seconds, after -warmup-ops
// unmeasured ones on the same connections; -before-measure and -after-measure are shell commands run
// between the phases (bench/instructions.sh turns valgrind's instruction counting on and off with them),
// and the Writ lease modes fetch their decision once, on their first operation (in the warm-up when there
// is one; the server's decision TTL must cover the run), so the measured window holds the N operations
// and nothing else.
package main

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

type result struct {
	Ops       int64   `json:"ops"`
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"per_second"`
	P50us     float64 `json:"p50_us"`
	P99us     float64 `json:"p99_us"`
	Errors    int64   `json:"errors"`
	FirstErr  string  `json:"first_error,omitempty"`
}

var (
	mode      = flag.String("mode", "", "writ-decide | opa | writ-lease | writ-lease-stream | pg-lease | redis-lease")
	clients   = flag.Int("clients", 16, "concurrent closed-loop clients")
	seconds   = flag.Float64("seconds", 5, "measured duration")
	url       = flag.String("url", "", "Writ base URL, or OPA's full data URL")
	keyFile   = flag.String("key", "", "the principal's private Ed25519 JWK (Writ modes)")
	principal = flag.String("principal", "", "the principal (Writ modes)")
	body      = flag.String("body", "", "request body file (writ-decide: the decision request; opa: {\"input\": …})")
	base      = flag.Int("base", 1, "writ-lease/pg-lease/redis-lease: client c uses key number base+c")
	dsn       = flag.String("dsn", "", "pg-lease: connection string of a database the caller created")
	addr      = flag.String("addr", "", "redis-lease: host:port of the private redis-server")
	conns     = flag.Int("conns", 0, "pg-lease: connections the clients share (0: one per client)")
	fixedOps  = flag.Int("ops", 0, "operations per client (0: run for -seconds)")
	warmupOps = flag.Int("warmup-ops", 0, "with -ops: unmeasured operations per client first, on the same connections")
	before    = flag.String("before-measure", "", "with -ops: a shell command run after the warm-up, before the measured operations")
	after     = flag.String("after-measure", "", "with -ops: a shell command run after the measured operations")
	assertTTL = flag.Int("assertion-ttl", 60, "Writ modes: lifetime of each caller assertion in seconds (Writ accepts up to 300)")
	leaseTTL  = flag.Int("lease-ttl-ms", 10000, "Writ lease modes: the ttl_ms asked for each lease")
	timeout   = flag.Duration("timeout", 30*time.Second, "Writ modes: the HTTP client's timeout of one request")
	useSess   = flag.Bool("session", false, "writ-decide, writ-lease: each client opens a caller session (POST /v1/sessions) before the measured window and signs each request with an HS256 request token instead of an Ed25519 assertion")
	sessTTL   = flag.Int("session-ttl-ms", 0, "with -session: the ttl_ms asked for each session (0: the server's maximum)")
)

func main() {
	flag.Parse()
	if *useSess && *mode != "writ-decide" && *mode != "writ-lease" {
		fail(fmt.Errorf("-session is for -mode writ-decide or writ-lease (the lease stream opens with one assertion), not %q", *mode))
	}
	var op func(c int) (func() error, error)
	switch *mode {
	case "writ-decide":
		op = writDecide()
	case "opa":
		op = opa()
	case "writ-lease":
		op = writLease()
	case "writ-lease-stream":
		op = writLeaseStream()
	case "pg-lease":
		op = pgLease()
	case "redis-lease":
		op = redisLease()
	default:
		fail(fmt.Errorf("unknown -mode %q", *mode))
	}
	fmt.Println(string(must(json.Marshal(measure(op)))))
}

func measure(setup func(c int) (func() error, error)) result {
	ops := make([]func() error, *clients)
	for c := range ops {
		ops[c] = must(setup(c))
	}
	if *fixedOps > 0 {
		return measureFixed(ops)
	}
	lats := make([][]float64, *clients)
	var errs atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	until := start.Add(time.Duration(*seconds * float64(time.Second)))
	for c := range ops {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for time.Now().Before(until) {
				t := time.Now()
				if err := ops[c](); err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				lats[c] = append(lats[c], float64(time.Since(t).Microseconds()))
			}
		}(c)
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	var all []float64
	for _, l := range lats {
		all = append(all, l...)
	}
	sort.Float64s(all)
	r := result{Ops: int64(len(all)), Seconds: elapsed, PerSecond: float64(len(all)) / elapsed, Errors: errs.Load()}
	if len(all) > 0 {
		r.P50us = all[len(all)*50/100]
		r.P99us = all[len(all)*99/100]
	}
	if s, ok := firstErr.Load().(string); ok {
		r.FirstErr = s
	}
	return r
}

// measureFixed: -ops operations per client after -warmup-ops, the clients in step (each phase ends when
// every client finished it); any failed operation ends the run with an error, so a count is never of
// fewer operations than claimed.
func measureFixed(ops []func() error) result {
	phase := func(n int) []float64 {
		lats := make([][]float64, len(ops))
		errs := make([]error, len(ops))
		var wg sync.WaitGroup
		for c := range ops {
			wg.Add(1)
			go func(c int) {
				defer wg.Done()
				for i := 0; i < n; i++ {
					t := time.Now()
					if err := ops[c](); err != nil {
						errs[c] = err
						return
					}
					lats[c] = append(lats[c], float64(time.Since(t).Microseconds()))
				}
			}(c)
		}
		wg.Wait()
		var all []float64
		for c := range ops {
			fail(errs[c])
			all = append(all, lats[c]...)
		}
		return all
	}
	shell := func(cmd string) {
		if cmd != "" {
			out, err := exec.Command("sh", "-c", cmd).CombinedOutput()
			if err != nil {
				fail(fmt.Errorf("%s: %w: %s", cmd, err, out))
			}
		}
	}
	phase(*warmupOps)
	shell(*before)
	start := time.Now()
	all := phase(*fixedOps)
	elapsed := time.Since(start).Seconds()
	shell(*after)
	sort.Float64s(all)
	r := result{Ops: int64(len(all)), Seconds: elapsed, PerSecond: float64(len(all)) / elapsed}
	if len(all) > 0 {
		r.P50us = all[len(all)*50/100]
		r.P99us = all[len(all)*99/100]
	}
	return r
}

// --- Writ over HTTP -------------------------------------------------------------------------------

type signer struct {
	key       ed25519.PrivateKey
	kid       string
	principal string
}

func loadSigner() *signer {
	var jwk struct{ Kid, D string }
	fail(json.Unmarshal(must(os.ReadFile(*keyFile)), &jwk))
	seed := must(base64.RawURLEncoding.DecodeString(jwk.D))
	return &signer{key: ed25519.NewKeyFromSeed(seed), kid: jwk.Kid, principal: *principal}
}

var b64 = base64.RawURLEncoding

// assertion: a caller assertion as the SDK makes it (compact JWS, EdDSA, fresh jti, 60 s unless -assertion-ttl).
func (s *signer) assertion() string {
	return s.assertionWith(nil)
}

// assertionWith: a fresh assertion with these claims besides (a session opening's binding).
func (s *signer) assertionWith(extra map[string]any) string {
	jti := make([]byte, 16)
	_, _ = rand.Read(jti)
	return s.assertionAt(time.Now().Unix(), hex.EncodeToString(jti), extra)
}

// assertionAt: the assertion issued at iat (seconds) with this jti and these claims besides.
func (s *signer) assertionAt(iat int64, jti string, extra map[string]any) string {
	header := must(json.Marshal(map[string]string{"alg": "EdDSA", "kid": s.kid, "typ": "JWT"}))
	all := map[string]any{"iss": s.principal, "sub": s.principal, "aud": "writ", "iat": iat, "exp": iat + int64(*assertTTL), "jti": jti}
	for name, value := range extra {
		all[name] = value
	}
	claims := must(json.Marshal(all))
	input := b64.EncodeToString(header) + "." + b64.EncodeToString(claims)
	return input + "." + b64.EncodeToString(ed25519.Sign(s.key, []byte(input)))
}

// auth signs one client's requests (one per client, not safe for concurrent use): a fresh assertion each,
// or with sessions request tokens of its caller session, opened now (before the measured window),
// renewed when a fifth of its life is left and re-opened once when Writ refuses it.
type auth struct {
	s        *signer
	h        *http.Client
	sessions bool
	sess     *session
}

// authorizer: this client's auth; with sessions its session is opened now.
func (s *signer) authorizer(h *http.Client, sessions bool) (*auth, error) {
	a := &auth{s: s, h: h, sessions: sessions}
	if sessions {
		if err := a.open(); err != nil {
			return nil, err
		}
	}
	return a, nil
}

func (a *auth) open() error {
	sess, err := a.s.openSession(a.h)
	if err != nil {
		return err
	}
	a.sess = sess
	return nil
}

// bearer: the Authorization bearer for one request (method, path); a session with a fifth of its life
// left (or none: the last open failed, or Writ refused it) is replaced first.
func (a *auth) bearer(method, path string) (string, error) {
	if !a.sessions {
		return a.s.assertion(), nil
	}
	if a.sess == nil || time.Until(a.sess.expiresAt) < a.sess.life/5 {
		a.sess = nil
		if err := a.open(); err != nil {
			return "", err
		}
	}
	jti := make([]byte, 16)
	_, _ = rand.Read(jti)
	return a.sess.requestToken(method, path, time.Now().Unix(), hex.EncodeToString(jti)), nil
}

// call sends one request to Writ (path under -url) signed by a and decodes its 2xx JSON answer into out.
// A session Writ refuses as CALLER_SESSION_INVALID (it no longer knows it: restarted with other keys, the
// session expired, the principal's key rotated) had no effect: a new session, and the request once more.
func (a *auth) call(method, path string, payload []byte, out any) error {
	bearer, err := a.bearer(method, path)
	if err != nil {
		return err
	}
	err = call(a.h, method, *url+path, bearer, payload, out)
	var refused *httpError
	if !a.sessions || !errors.As(err, &refused) || refused.status != http.StatusUnauthorized || refused.code() != "CALLER_SESSION_INVALID" {
		return err
	}
	a.sess = nil
	if bearer, err = a.bearer(method, path); err != nil {
		return err
	}
	return call(a.h, method, *url+path, bearer, payload, out)
}

// session: a caller session as POST /v1/sessions opened it; one per client (its HMAC is not safe for
// concurrent use).
type session struct {
	principal string
	header    string // base64url of {"alg":"HS256","kid":<session token>}
	mac       hash.Hash
	expiresAt time.Time     // by this machine's clock: the sooner of Writ's expires_at and the send time plus -session-ttl-ms
	life      time.Duration // expiresAt less the time the open was sent
}

// sessionKey: K = HKDF-SHA256(ikm = the X25519 shared secret, salt empty, info = "writ caller session
// v1|" + client_x + "|" + server_x, 32 bytes), the x strings as on the wire.
func sessionKey(shared []byte, clientX, serverX string) ([]byte, error) {
	return hkdf.Key(sha256.New, shared, nil, "writ caller session v1|"+clientX+"|"+serverX, 32)
}

func newSession(token string, key []byte, principal string) *session {
	header := must(json.Marshal(struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
	}{"HS256", token}))
	return &session{principal: principal, header: b64.EncodeToString(header), mac: hmac.New(sha256.New, key)}
}

// requestToken: the HS256 request token for one request (claims in the protocol's order).
func (ss *session) requestToken(method, path string, iat int64, jti string) string {
	claims := must(json.Marshal(struct {
		Iss string `json:"iss"`
		Sub string `json:"sub"`
		Aud string `json:"aud"`
		Iat int64  `json:"iat"`
		Exp int64  `json:"exp"`
		Jti string `json:"jti"`
		Htm string `json:"htm"`
		Htu string `json:"htu"`
	}{ss.principal, ss.principal, "writ", iat, iat + int64(*assertTTL), jti, method, path}))
	input := ss.header + "." + b64.EncodeToString(claims)
	ss.mac.Reset()
	ss.mac.Write([]byte(input))
	return input + "." + b64.EncodeToString(ss.mac.Sum(nil))
}

// openingClaims: the claims that bind the assertion opening a session to the client's X25519 public key
// (RFC 7800 cnf.jwk) and to that request (htm, htu), README "Caller sessions" step 1.
func openingClaims(clientX string) map[string]any {
	return map[string]any{
		"cnf": map[string]any{"jwk": map[string]string{"kty": "OKP", "crv": "X25519", "x": clientX}},
		"htm": "POST", "htu": "/v1/sessions",
	}
}

// openSession: POST /v1/sessions with an assertion bound to a new X25519 public key (cnf.jwk) and to that
// request (htm, htu), as Writ requires of an opening; K from the answer's.
func (s *signer) openSession(h *http.Client) (*session, error) {
	priv, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	clientX := b64.EncodeToString(priv.PublicKey().Bytes())
	req := map[string]any{"public_key": map[string]string{"kty": "OKP", "crv": "X25519", "x": clientX}}
	if *sessTTL > 0 {
		req["ttl_ms"] = *sessTTL
	}
	var answer struct {
		Session   string `json:"session"`
		PublicKey struct {
			X string `json:"x"`
		} `json:"public_key"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	sentAt := time.Now()
	if err := call(h, "POST", *url+"/v1/sessions", s.assertionWith(openingClaims(clientX)), must(json.Marshal(req)), &answer); err != nil {
		return nil, fmt.Errorf("opening a caller session: %w", err)
	}
	serverPub, err := b64.DecodeString(answer.PublicKey.X)
	if err != nil {
		return nil, fmt.Errorf("the session's public key: %w", err)
	}
	pub, err := ecdh.X25519().NewPublicKey(serverPub)
	if err != nil {
		return nil, fmt.Errorf("the session's public key: %w", err)
	}
	shared, err := priv.ECDH(pub) // an error for a low-order point (an all-zero result)
	if err != nil {
		return nil, fmt.Errorf("the session's public key: %w", err)
	}
	key, err := sessionKey(shared, clientX, answer.PublicKey.X)
	if err != nil {
		return nil, err
	}
	if answer.ExpiresAt.IsZero() {
		return nil, fmt.Errorf("opening a caller session: the answer has no expires_at")
	}
	ss := newSession(answer.Session, key, s.principal)
	ss.expiresAt = answer.ExpiresAt
	if *sessTTL > 0 {
		if byTTL := sentAt.Add(time.Duration(*sessTTL) * time.Millisecond); byTTL.Before(ss.expiresAt) {
			ss.expiresAt = byTTL
		}
	}
	ss.life = ss.expiresAt.Sub(sentAt)
	return ss, nil
}

func httpClient() *http.Client {
	return &http.Client{Timeout: *timeout, Transport: &http.Transport{MaxIdleConnsPerHost: 1, MaxConnsPerHost: 1, DisableCompression: true}}
}

// httpError: an answer other than 2xx.
type httpError struct {
	method, url string
	status      int
	body        []byte
}

func (e *httpError) Error() string {
	return fmt.Sprintf("%s %s: %d %s", e.method, e.url, e.status, truncate(e.body))
}

// code: the problem's code (problem+json), or "".
func (e *httpError) code() string {
	var problem struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(e.body, &problem)
	return problem.Code
}

// call sends one request and decodes a 2xx JSON answer into out (any other status is an *httpError).
func call(h *http.Client, method, u, bearer string, payload []byte, out any) error {
	req := must(http.NewRequest(method, u, bytes.NewReader(payload)))
	req.Header.Set("content-type", "application/json")
	if bearer != "" {
		req.Header.Set("authorization", "Bearer "+bearer)
	}
	res, err := h.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	if res.StatusCode/100 != 2 {
		return &httpError{method: method, url: u, status: res.StatusCode, body: data}
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

func writDecide() func(c int) (func() error, error) {
	s := loadSigner()
	payload := must(os.ReadFile(*body))
	return func(c int) (func() error, error) {
		a, err := s.authorizer(httpClient(), *useSess)
		if err != nil {
			return nil, err
		}
		return func() error {
			var d struct{ Allow bool }
			if err := a.call("POST", "/v1/decisions", payload, &d); err != nil {
				return err
			}
			if !d.Allow {
				return fmt.Errorf("decision denied")
			}
			return nil
		}, nil
	}
}

func opa() func(c int) (func() error, error) {
	payload := must(os.ReadFile(*body))
	return func(c int) (func() error, error) {
		h := httpClient()
		return func() error {
			var r struct {
				Result *struct{ Allow bool } `json:"result"`
			}
			if err := call(h, "POST", *url, "", payload, &r); err != nil {
				return err
			}
			if r.Result == nil || !r.Result.Allow {
				return fmt.Errorf("opa: no allow in the answer")
			}
			return nil
		}, nil
	}
}

// titleDecision: the allow decision for client c's key (wp:post:(base+c)#title), fetched again every
// 20 s (decisions live 30 s).
func titleDecision(a *auth, c int) func() (string, error) {
	decide := []byte(fmt.Sprintf(`{"action":"update_post","resource":"wp:post:%d","environment":"production","fields":["title"]}`, *base+c))
	var token string
	var fetched time.Time
	return func() (string, error) {
		if token == "" || (*fixedOps == 0 && time.Since(fetched) > 20*time.Second) {
			var d struct {
				Allow bool
				Token string
			}
			if err := a.call("POST", "/v1/decisions", decide, &d); err != nil {
				return "", err
			}
			if !d.Allow {
				return "", fmt.Errorf("decision denied")
			}
			token, fetched = d.Token, time.Now()
		}
		return token, nil
	}
}

type grantedLease struct {
	LeaseID string `json:"lease_id"`
	Token   string `json:"token"`
}

// leasePair: one acquire + release of the client's key with the current decision.
func leasePair(decision func() (string, error), acquire func(token string, out *grantedLease) error, release func(lease grantedLease) error) func() error {
	return func() error {
		token, err := decision()
		if err != nil {
			return err
		}
		var lease grantedLease
		if err := acquire(token, &lease); err != nil {
			return err
		}
		return release(lease)
	}
}

// writLease: acquire + release of wp:post:(base+c)#title with a decision refetched every 20 s (decisions live 30 s).
func writLease() func(c int) (func() error, error) {
	s := loadSigner()
	return func(c int) (func() error, error) {
		a, err := s.authorizer(httpClient(), *useSess)
		if err != nil {
			return nil, err
		}
		return leasePair(titleDecision(a, c), func(token string, out *grantedLease) error {
			return a.call("POST", "/v1/leases", must(json.Marshal(map[string]any{"decisions": []string{token}, "ttl_ms": *leaseTTL})), out)
		}, func(lease grantedLease) error {
			return a.call("DELETE", "/v1/leases/"+lease.LeaseID, must(json.Marshal(map[string]string{"token": lease.Token})), nil)
		}), nil
	}
}

// writLeaseStream: the same pairs over one lease stream per client (GET /v1/leases/stream, a WebSocket
// opened with one caller assertion); the decision is fetched over HTTP as in writLease.
func writLeaseStream() func(c int) (func() error, error) {
	s := loadSigner()
	return func(c int) (func() error, error) {
		h := httpClient()
		header := http.Header{}
		header.Set("authorization", "Bearer "+s.assertion())
		conn, res, err := websocket.DefaultDialer.Dial(strings.Replace(*url, "http", "ws", 1)+"/v1/leases/stream", header)
		if err != nil {
			if res != nil {
				data, _ := io.ReadAll(res.Body)
				return nil, fmt.Errorf("opening the lease stream: %d %s", res.StatusCode, truncate(data))
			}
			return nil, err
		}
		next := 0
		// roundTrip sends one request and reads its answer (one request in flight per client, so in order).
		roundTrip := func(request map[string]any, out any) error {
			next++
			request["id"] = next
			if err := conn.WriteMessage(websocket.TextMessage, must(json.Marshal(request))); err != nil {
				return err
			}
			_, data, err := conn.ReadMessage()
			if err != nil {
				return err
			}
			var reply struct {
				ID      int             `json:"id"`
				OK      bool            `json:"ok"`
				Result  json.RawMessage `json:"result"`
				Problem json.RawMessage `json:"problem"`
			}
			if err := json.Unmarshal(data, &reply); err != nil {
				return err
			}
			if !reply.OK || reply.ID != next {
				return fmt.Errorf("lease stream %s: %s", request["op"], truncate(data))
			}
			if out != nil {
				return json.Unmarshal(reply.Result, out)
			}
			return nil
		}
		assertions := must(s.authorizer(h, false))
		return leasePair(titleDecision(assertions, c), func(token string, out *grantedLease) error {
			return roundTrip(map[string]any{"op": "acquire", "decisions": []string{token}, "ttl_ms": *leaseTTL}, out)
		}, func(lease grantedLease) error {
			return roundTrip(map[string]any{"op": "release", "lease_id": lease.LeaseID, "token": lease.Token}, nil)
		}), nil
	}
}

// --- PostgreSQL: one row per key, compare-and-set in one autocommitted statement each way -------------

func pgLease() func(c int) (func() error, error) {
	ctx := context.Background()
	cfg := must(pgxpool.ParseConfig(*dsn))
	n := *clients
	if *conns > 0 && *conns < n {
		n = *conns
	}
	cfg.MaxConns = int32(n)
	cfg.MinConns = int32(n)
	pool := must(pgxpool.NewWithConfig(ctx, cfg))
	_, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS leases (key text PRIMARY KEY, holder text, epoch bigint NOT NULL DEFAULT 0, expires_at timestamptz)`)
	fail(err)
	return func(c int) (func() error, error) {
		key := "wp:post:" + strconv.Itoa(*base+c) + "#title"
		holder := "client-" + strconv.Itoa(c)
		if _, err := pool.Exec(ctx, `INSERT INTO leases (key) VALUES ($1) ON CONFLICT DO NOTHING`, key); err != nil {
			return nil, err
		}
		return func() error {
			var epoch int64
			err := pool.QueryRow(ctx, `UPDATE leases SET holder = $2, epoch = epoch + 1, expires_at = now() + interval '10 seconds'
				WHERE key = $1 AND (holder IS NULL OR expires_at < now()) RETURNING epoch`, key, holder).Scan(&epoch)
			if err != nil {
				return fmt.Errorf("acquire: %w", err)
			}
			tag, err := pool.Exec(ctx, `UPDATE leases SET holder = NULL, expires_at = NULL WHERE key = $1 AND holder = $2 AND epoch = $3`, key, holder, epoch)
			if err != nil {
				return err
			}
			if tag.RowsAffected() != 1 {
				return fmt.Errorf("release changed %d rows", tag.RowsAffected())
			}
			return nil
		}, nil
	}
}

// --- Redis: SET NX PX, released by a Lua compare-and-delete ---------------------------------------

var release = redis.NewScript(`if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end`)

func redisLease() func(c int) (func() error, error) {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: *addr, PoolSize: *clients, MinIdleConns: *clients})
	fail(release.Load(ctx, rdb).Err())
	return func(c int) (func() error, error) {
		key := "wp:post:" + strconv.Itoa(*base+c) + "#title"
		n := 0
		return func() error {
			n++
			token := strconv.Itoa(c) + "-" + strconv.Itoa(n)
			ok, err := rdb.SetNX(ctx, key, token, 10*time.Second).Result()
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("%s is held", key)
			}
			deleted, err := release.Run(ctx, rdb, []string{key}, token).Int()
			if err != nil {
				return err
			}
			if deleted != 1 {
				return fmt.Errorf("release deleted %d", deleted)
			}
			return nil
		}, nil
	}
}

func truncate(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}

func must[T any](v T, err error) T {
	fail(err)
	return v
}

func fail(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}
