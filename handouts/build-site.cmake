# cmake -DDOXYGEN=... -DDOXYFILE=... -DSOURCE_DIR=... -DHTML_DIR=... -DMATHJAX_DIR=... -P build-site.cmake
#
# Builds the course site: Doxygen over the handouts and the API, then the part of MathJax the
# pages load (TeX input, SVG output, the extensions), copied from Debian's libjs-mathjax into
# html/mathjax so that the site works offline and from any web server. Doxygen fails on any
# warning (WARN_AS_ERROR in the Doxyfile).
cmake_minimum_required(VERSION 3.25)
foreach(var DOXYGEN DOXYFILE SOURCE_DIR HTML_DIR MATHJAX_DIR)
  if(NOT ${var})
    message(FATAL_ERROR "build-site.cmake: -D${var}=... is required")
  endif()
endforeach()

execute_process(COMMAND ${DOXYGEN} ${DOXYFILE} WORKING_DIRECTORY ${SOURCE_DIR} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "Doxygen failed (exit status ${rc}); its warnings are above.")
endif()

set(out ${HTML_DIR}/mathjax)
file(REMOVE_RECURSE ${out})
file(MAKE_DIRECTORY ${out}/jax/input ${out}/jax/output/SVG/fonts ${out}/localization)
file(COPY ${MATHJAX_DIR}/MathJax.js ${MATHJAX_DIR}/extensions DESTINATION ${out} FOLLOW_SYMLINK_CHAIN)
file(COPY ${MATHJAX_DIR}/jax/element DESTINATION ${out}/jax)
file(COPY ${MATHJAX_DIR}/jax/input/TeX DESTINATION ${out}/jax/input)
file(COPY ${MATHJAX_DIR}/jax/output/SVG/config.js ${MATHJAX_DIR}/jax/output/SVG/jax.js
          ${MATHJAX_DIR}/jax/output/SVG/autoload DESTINATION ${out}/jax/output/SVG)
file(COPY ${MATHJAX_DIR}/jax/output/SVG/fonts/TeX DESTINATION ${out}/jax/output/SVG/fonts)
file(COPY ${MATHJAX_DIR}/localization/en DESTINATION ${out}/localization)
message(STATUS "Course site: ${HTML_DIR}/index.html")
