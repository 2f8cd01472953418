// Addresses by kind of chain live with the kinds' codecs (src/kinds/address.ts), below the config
// that validates with them; chain modules and audits import them from here too.
export * from '../kinds/address.ts';
