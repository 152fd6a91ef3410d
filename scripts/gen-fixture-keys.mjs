// Generates the example deployment's principal keys (fixtures/keys/<id>.jwk, private JWKs).
// These are TEST-ONLY keys for the demo and the tests; a real deployment registers its own public keys.
import { exportJWK, generateKeyPair } from 'jose';
import { existsSync, writeFileSync } from 'node:fs';

const ids = process.argv.slice(2);
for (const id of ids) {
  const file = `fixtures/keys/${id}.jwk`;
  if (existsSync(file)) continue;
  const { privateKey } = await generateKeyPair('EdDSA', { crv: 'Ed25519', extractable: true });
  const jwk = { ...(await exportJWK(privateKey)), kid: `${id}-k1`, alg: 'EdDSA' };
  writeFileSync(file, `${JSON.stringify(jwk, null, 2)}\n`, { mode: 0o600 });
  console.log(`wrote ${file}`);
}
