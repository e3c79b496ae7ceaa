// Loaded between require.js and embed-amd.js (see nb_ipywidgets_js in _config.yml): the ipywidgets HTML
// manager loads its fonts and styles from <RequireJS baseUrl>/@jupyter-widgets/html-manager/dist/, which
// by default is the page's own folder. Point both at this folder, so every page finds them offline.
(function () {
  var dir = new URL(".", document.currentScript.src).href;
  window.requirejs.config({baseUrl: dir});
  window.__jupyter_widgets_assets_path__ = dir + "@jupyter-widgets/html-manager/dist/";
})();
