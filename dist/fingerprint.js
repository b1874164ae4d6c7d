'use strict';
// Entry point of the fingerprint step: see index.js.
require('./index.js').run('fingerprint');
