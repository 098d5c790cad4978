// Builds ../../pytest_llmbench/report/assets/plotly-llmbench.min.js.gz: plotly.js core and the
// trace types report.html draws, minified, gzipped (the report inflates it in the browser).
'use strict';
const fs = require('fs');
const path = require('path');
const zlib = require('zlib');
const esbuild = require('esbuild');
const InlineCSSPlugin = require('esbuild-plugin-inline-css');
const { environmentPlugin } = require('esbuild-plugin-environment');

const out = path.join(__dirname, '..', '..', 'pytest_llmbench', 'report', 'assets',
  'plotly-llmbench.min.js.gz');

esbuild.build({
  entryPoints: [path.join(__dirname, 'entry.js')],
  write: false,
  format: 'iife',
  globalName: 'Plotly',
  bundle: true,
  minify: true,
  sourcemap: false,
  legalComments: 'none',
  // plotly.js's own build settings (its esbuild-config.js), without the WebGL traces' plugins.
  plugins: [InlineCSSPlugin(), environmentPlugin({ NODE_DEBUG: false })],
  alias: { stream: 'stream-browserify' },
  define: { global: 'window', 'define.amd': 'false' },
  target: 'es2016',
  logLevel: 'warning',
}).then((result) => {
  const version = require('plotly.js/package.json').version;
  const banner = `/* plotly.js v${version} (MIT), partial bundle: bar, box, heatmap, scatter, scatterpolar */\n`;
  const source = Buffer.concat([Buffer.from(banner), result.outputFiles[0].contents]);
  // mtime 0 in the gzip header: the same sources give the same bytes.
  fs.writeFileSync(out, zlib.gzipSync(source, { level: 9 }));
  console.log(`${out}: ${source.length} bytes, ${fs.statSync(out).size} gzipped`);
}).catch((error) => {
  console.error(error);
  process.exit(1);
});
