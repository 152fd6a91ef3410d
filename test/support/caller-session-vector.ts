/** The caller-sessions protocol's test vector (README, "Caller sessions"; bench/loadgen/session_test.go checks the same). */
export const VECTOR = {
  CLIENT_D: 'AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE',
  SERVER_D: 'AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI',
  CLIENT_X: 'pOCSkrZRwni5dyxWn1-puxPZBrRqtoyd-dwrRAn4ogk',
  SERVER_X: 'zo060cy2M-x7cMF4FKXHbs0CloUFDTRHRboFhw5YfVk',
  SHARED: 'LtdqtUmx5zwDHrSclEjweYrqgbaYJ5oMPcPkn7_EuVM',
  K: 'S-CBd8C22JQjs-oYo6uzI4oTzzQjF2v_uzpsjxUiyTc',
  TOKEN: 'eyJhbGciOiJIUzI1NiIsImtpZCI6IndzMS5leGFtcGxlLWtpZC5BQUFBIn0.eyJpc3MiOiJzZW8tYWdlbnQtNyIsInN1YiI6InNlby1hZ2VudC03IiwiYXVkIjoid3JpdCIsImlhdCI6MTc5NjAwMDAwMCwiZXhwIjoxNzk2MDAwMDYwLCJqdGkiOiJqLTEiLCJodG0iOiJQT1NUIiwiaHR1IjoiL3YxL2xlYXNlcyJ9.uEPcapQPqBJBivDyo-JfWxAraPZ16SUza2VP16o_oLk',
  /** The claims of the assertion that opens the vector's session (README, after the token): bound to CLIENT_X. */
  OPENING_CLAIMS: '{"iss":"seo-agent-7","sub":"seo-agent-7","aud":"writ","iat":1796000000,"exp":1796000060,"jti":"j-0","cnf":{"jwk":{"kty":"OKP","crv":"X25519","x":"pOCSkrZRwni5dyxWn1-puxPZBrRqtoyd-dwrRAn4ogk"}},"htm":"POST","htu":"/v1/sessions"}',
} as const;
