'use strict';
// Entry point of the post step: see index.js.
require('./index.js').run('post');
