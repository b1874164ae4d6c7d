'use strict';
// Entry point of the save step: see index.js.
require('./index.js').run('save');
