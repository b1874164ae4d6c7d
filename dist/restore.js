'use strict';
// Entry point of the restore step: see index.js.
require('./index.js').run('restore');
