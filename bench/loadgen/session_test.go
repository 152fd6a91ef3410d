package main

import (
	"crypto/ecdh"
	"crypto/rand"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// The caller-sessions protocol's test vector (README "Caller sessions"; the SDK tests the same in
// test/wire/caller-session.test.ts). Run: cd bench/loadgen && go test ./...
func TestSessionTestVector(t *testing.T) {
	scalar := func(b byte) *ecdh.PrivateKey {
		d := make([]byte, 32)
		for i := range d {
			d[i] = b
		}
		return must(ecdh.X25519().NewPrivateKey(d))
	}
	client, server := scalar(1), scalar(2)
	clientX := b64.EncodeToString(client.PublicKey().Bytes())
	serverX := b64.EncodeToString(server.PublicKey().Bytes())
	if clientX != "pOCSkrZRwni5dyxWn1-puxPZBrRqtoyd-dwrRAn4ogk" || serverX != "zo060cy2M-x7cMF4FKXHbs0CloUFDTRHRboFhw5YfVk" {
		t.Fatalf("public keys %s %s", clientX, serverX)
	}
	shared := must(client.ECDH(server.PublicKey()))
	if got := b64.EncodeToString(shared); got != "LtdqtUmx5zwDHrSclEjweYrqgbaYJ5oMPcPkn7_EuVM" {
		t.Fatalf("shared %s", got)
	}
	key := must(sessionKey(shared, clientX, serverX))
	if got := b64.EncodeToString(key); got != "S-CBd8C22JQjs-oYo6uzI4oTzzQjF2v_uzpsjxUiyTc" {
		t.Fatalf("K %s", got)
	}
	*assertTTL = 60
	ss := newSession("ws1.example-kid.AAAA", key, "seo-agent-7")
	want := "eyJhbGciOiJIUzI1NiIsImtpZCI6IndzMS5leGFtcGxlLWtpZC5BQUFBIn0.eyJpc3MiOiJzZW8tYWdlbnQtNyIsInN1YiI6InNlby1hZ2VudC03IiwiYXVkIjoid3JpdCIsImlhdCI6MTc5NjAwMDAwMCwiZXhwIjoxNzk2MDAwMDYwLCJqdGkiOiJqLTEiLCJodG0iOiJQT1NUIiwiaHR1IjoiL3YxL2xlYXNlcyJ9.uEPcapQPqBJBivDyo-JfWxAraPZ16SUza2VP16o_oLk"
	// Twice: the session's HMAC is reset between tokens.
	for i := 0; i < 2; i++ {
		if got := ss.requestToken("POST", "/v1/leases", 1796000000, "j-1"); got != want {
			t.Fatalf("token %d:\n%s\nwant\n%s", i, got, want)
		}
	}
}

// The vector's opening assertion (README "Caller sessions"): bound to the client key and to POST /v1/sessions.
func TestSessionOpeningVector(t *testing.T) {
	*assertTTL = 60
	clientX := "pOCSkrZRwni5dyxWn1-puxPZBrRqtoyd-dwrRAn4ogk"
	assertion := testSigner().assertionAt(1796000000, "j-0", openingClaims(clientX))
	var got, want map[string]any
	if err := json.Unmarshal(must(b64.DecodeString(strings.Split(assertion, ".")[1])), &got); err != nil {
		t.Fatal(err)
	}
	vector := `{"iss":"seo-agent-7","sub":"seo-agent-7","aud":"writ","iat":1796000000,"exp":1796000060,"jti":"j-0","cnf":{"jwk":{"kty":"OKP","crv":"X25519","x":"pOCSkrZRwni5dyxWn1-puxPZBrRqtoyd-dwrRAn4ogk"}},"htm":"POST","htu":"/v1/sessions"}`
	if err := json.Unmarshal([]byte(vector), &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("opening claims\n%v\nwant\n%v", got, want)
	}
}

// A low-order server key (all zeros) gives no secret: ECDH refuses it.
func TestSessionLowOrderPoint(t *testing.T) {
	priv := must(ecdh.X25519().GenerateKey(rand.Reader))
	pub := must(ecdh.X25519().NewPublicKey(make([]byte, 32)))
	if _, err := priv.ECDH(pub); err == nil {
		t.Fatal("ECDH with the all-zero point succeeded")
	}
}
