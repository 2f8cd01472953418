import { inspect } from 'node:util';

/**
 * A value that must never reach a log, an error message or a response: every way of printing it
 * prints a placeholder, and only reveal() gives the value to the code that signs with it.
 */
export class Secret<T> {
  readonly #value: T;
  constructor(value: T) {
    this.#value = value;
  }
  reveal(): T {
    return this.#value;
  }
  toJSON(): string {
    return '[secret]';
  }
  toString(): string {
    return '[secret]';
  }
  [inspect.custom](): string {
    return '[secret]';
  }
}
