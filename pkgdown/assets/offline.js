/* Offline stand-ins for the libraries pkgdown's BS5 template loads from CDNs, so that pkgdown.js
   runs without network: the navbar stays put (headroom), the article table of contents is built
   from the h2/h3 headings (bootstrap-toc), copy buttons and search marking are left out. */
(function($) {
  $.fn.headroom = function() { return this; };
  window.ClipboardJS = { isSupported: function() { return false; } };
  window.Mark = function() { this.mark = function() {}; };
  window.Toc = {
    init: function(opts) {
      var $nav = opts.$nav;
      if (!$nav || !$nav.length) return;
      var $ul = $('<ul class="nav nav-pills flex-column"></ul>');
      opts.$scope.filter('h2, h3').each(function() {
        var $h = $(this);
        var id = $h.attr('id') || $h.closest('.section, section').attr('id');
        if (!id) return;
        var text = $h.clone().children('.anchor').remove().end().text().trim();
        var $a = $('<a class="nav-link"></a>').attr('href', '#' + id).text(text);
        if (this.tagName === 'H3') $a.addClass('ms-3');
        $ul.append($('<li class="nav-item"></li>').append($a));
      });
      $nav.append($ul);
    }
  };
})(window.jQuery);
