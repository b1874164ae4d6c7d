'use strict';
// Entry point of the main step: see index.js.
require('./index.js').run('main');
