import { describe, expect, it } from 'vitest';
import { keyRoot, keysConflict } from '../../src/wire/key-family.js';

describe('coordination key families', () => {
  it('a field key is a child of its resource key; other keys are roots', () => {
    expect(keyRoot('wp:post:1024#title')).toBe('wp:post:1024');
    expect(keyRoot('wp:post:1024')).toBe('wp:post:1024');
    expect(keyRoot('domain:SEO_METADATA:example.com')).toBe('domain:SEO_METADATA:example.com');
  });

  it('a root conflicts with its children, siblings and strangers do not conflict', () => {
    expect(keysConflict('deploy:site:www', 'deploy:site:www#config')).toBe(true);
    expect(keysConflict('deploy:site:www#config', 'deploy:site:www')).toBe(true);
    expect(keysConflict('deploy:site:www#config', 'deploy:site:www#config')).toBe(true);
    expect(keysConflict('deploy:site:www#config', 'deploy:site:www#image')).toBe(false);
    // A key that only starts like the root is another resource.
    expect(keysConflict('deploy:site:www', 'deploy:site:www2#config')).toBe(false);
    expect(keysConflict('deploy:site:www', 'deploy:site:www2')).toBe(false);
  });
});
