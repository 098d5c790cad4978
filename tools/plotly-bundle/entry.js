'use strict';
// The trace types pytest_llmbench/report/charts.py draws; scatter comes with the core.
var Plotly = require('plotly.js/lib/core');
Plotly.register([
  require('plotly.js/lib/bar'),
  require('plotly.js/lib/box'),
  require('plotly.js/lib/heatmap'),
  require('plotly.js/lib/scatterpolar'),
]);
module.exports = Plotly;
