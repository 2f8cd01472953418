#!/usr/bin/env node
// The node runs from its TypeScript sources through tsx's loader: no build step to forget.
import { register } from 'tsx/esm/api';

register();
await import('../src/cli.ts');
