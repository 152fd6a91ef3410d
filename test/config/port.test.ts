import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';

describe('WRIT_PORT', () => {
  it('is a port number from 0 to 65535: anything else is UNPROCESSABLE, naming it', () => {
    expect(loadConfig({}, { WRIT_PORT: '65535' }).port).toBe(65_535);
    expect(loadConfig({}, { WRIT_PORT: '0' }).port).toBe(0);
    expect(() => loadConfig({}, { WRIT_PORT: '65536' })).toThrow(/WRIT_PORT must be a port number from 0 to 65535, got "65536"/);
    expect(() => loadConfig({}, { WRIT_PORT: 'http' })).toThrow(/WRIT_PORT must be a non-negative integer/);
    expect(() => loadConfig({}, { WRIT_PORT: '99999' })).toThrow(expect.objectContaining({ code: 'UNPROCESSABLE' }));
  });
});
