// The formation movie's one piece of hand-written JavaScript (probes/views/movie_page.py inlines it): the step
// slider shows one frame, that is the chosen heads' patterns at that checkpoint (CircuitsVis's AttentionHeads,
// from the bundle inlined before this script), the step and the phase, and moves every chart's marker there.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("movie-data").textContent);
  var slider = document.getElementById("step-slider");
  var play = document.getElementById("play");
  var timer = null;

  function placeMarkers(step) {
    document.querySelectorAll("svg.chart").forEach(function (svg) {
      var d = svg.dataset;
      var x = +d.left + ((step - d.step0) / Math.max(d.step1 - d.step0, 1)) * (d.right - d.left);
      svg.querySelectorAll(".step-marker").forEach(function (marker) {
        marker.setAttribute("x1", x);
        marker.setAttribute("x2", x);
      });
    });
  }

  function showEdges(edges) {
    // each edge's share of the in-context gap at this checkpoint (path patching), the circuit's in bold
    var box = document.getElementById("movie-edges");
    box.textContent = "";
    if (!edges || !edges.length) return;
    var table = document.createElement("table");
    var head = table.insertRow();
    ["edge", "share of the gap", "95 % interval"].forEach(function (name) {
      var cell = document.createElement("th");
      cell.textContent = name;
      head.appendChild(cell);
    });
    edges.forEach(function (edge) {
      var row = table.insertRow();
      if (edge.circuit) row.className = "circuit";
      var interval = edge.low === null ? "" : "[" + edge.low.toFixed(3) + ", " + edge.high.toFixed(3) + "]";
      [edge.edge, edge.value.toFixed(3), interval].forEach(function (text) {
        row.insertCell().textContent = text;
      });
    });
    box.appendChild(table);
  }

  function show(index) {
    var frame = data.frames[index];
    var element = "movie-heads-" + index; // a new element per frame: React renders each into a root of its own
    document.getElementById("movie-heads").innerHTML = '<div id="' + element + '"></div>';
    CircuitsVis.render(element, CircuitsVis.AttentionHeads, {
      attention: frame.patterns,
      tokens: data.tokens,
      attentionHeadNames: data.heads,
    });
    document.getElementById("step-label").textContent = frame.label;
    document.getElementById("phase-label").textContent = frame.phase;
    showEdges(frame.edges);
    document.body.dataset.step = frame.step;
    placeMarkers(frame.step);
  }

  function stop() {
    clearInterval(timer);
    timer = null;
    play.textContent = "play";
  }

  slider.max = data.frames.length - 1;
  slider.addEventListener("input", function () {
    show(+slider.value);
  });
  play.addEventListener("click", function () {
    if (timer !== null) return stop();
    if (+slider.value >= data.frames.length - 1) slider.value = 0; // at the end: play from the start
    show(+slider.value);
    play.textContent = "pause";
    timer = setInterval(function () {
      slider.value = +slider.value + 1;
      show(+slider.value);
      if (+slider.value >= data.frames.length - 1) stop();
    }, 700);
  });
  show(+slider.value);
})();
