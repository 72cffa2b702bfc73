# Generates the C++ file that embeds the dashboard's page (index.html, dashboard.css,
# dashboard.js) into kilnd: run at build time as
#   cmake -DDIR=<this folder> -DOUT=<file.cc> -P embed.cmake
# Each file becomes a raw string literal; no file is read at run time.
set(assets "/=index.html" "/dashboard.css=dashboard.css" "/dashboard.js=dashboard.js"
           "/favicon.svg=favicon.svg")
set(delim "KILN_ASSET")
set(body "")
foreach(asset IN LISTS assets)
  string(REPLACE "=" ";" parts "${asset}")
  list(GET parts 0 url)
  list(GET parts 1 file)
  file(READ "${DIR}/${file}" content)
  string(FIND "${content}" ")${delim}\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${file} contains the raw string delimiter )${delim}\"")
  endif()
  if(file MATCHES "\\.html$")
    set(type "text/html; charset=utf-8")
  elseif(file MATCHES "\\.css$")
    set(type "text/css; charset=utf-8")
  elseif(file MATCHES "\\.js$")
    set(type "text/javascript; charset=utf-8")
  elseif(file MATCHES "\\.svg$")
    set(type "image/svg+xml")
  endif()
  string(APPEND body "      {\"${url}\", \"${type}\", R\"${delim}(${content})${delim}\"},\n")
endforeach()
file(WRITE "${OUT}.tmp"
"// Generated from server/dashboard/ by embed.cmake: do not edit.
#include \"server/dashboard.h\"

namespace kiln::server {

const std::vector<DashboardAsset>& dashboard_assets() {
  static const std::vector<DashboardAsset> assets = {
${body}  };
  return assets;
}

}  // namespace kiln::server
")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
